// The console's page templates past the first few (`ConsoleTemplates`), and the partials they
// share. The same rules hold: escaped values only, no scripts, no style attributes.

extension ConsoleTemplates {
    /// Shared pieces, registered under their own names (`{{>name}}`).
    static let partials: [String: String] = [
        "chart": chart, "deviceTable": deviceTable, "commandTable": commandTable, "pager": pager,
    ]

    /// A bar chart drawn by the server as SVG: no script, and readable by a screen reader through
    /// each bar's title and the table fallback.
    static let chart = """
        {{#chart}}
        <figure class="chart">
        <svg viewBox="0 0 {{width}} {{height}}" preserveAspectRatio="none" role="img" aria-label="{{summary}}">
        {{#bars}}<rect class="bar" x="{{x}}" y="{{y}}" width="{{barWidth}}" height="{{barHeight}}"><title>{{day}}: {{count}}</title></rect>{{/bars}}
        </svg>
        <div class="axis"><span>{{firstDay}}</span><span>{{lastDay}}</span></div>
        <figcaption>{{summary}}</figcaption>
        </figure>
        {{/chart}}
        {{^chart}}<p class="muted">No events in this period.</p>{{/chart}}
        """

    static let deviceTable = """
        <table>
        <thead><tr><th>Device</th><th>Nickname</th><th>User</th><th>Platform</th><th>Download</th><th>Last seen</th><th>State</th></tr></thead>
        <tbody>
        {{#devices}}
        <tr><td><a href="{{href}}">{{deviceId}}</a></td><td>{{nickname}}</td><td><a href="{{userHref}}">{{userId}}</a></td>
        <td>{{platform}} {{model}}</td><td>{{#downloadEnabled}}enabled{{/downloadEnabled}}{{^downloadEnabled}}off{{/downloadEnabled}}</td>
        <td>{{lastSeen}}</td><td>{{state}}</td></tr>
        {{/devices}}
        </tbody>
        </table>
        """

    static let commandTable = """
        <table>
        <thead><tr><th>Command</th><th>Type</th><th>Device</th><th>State</th><th>Created</th><th>Delivered</th><th>Finished</th><th>Reason</th><th></th></tr></thead>
        <tbody>
        {{#commands}}
        <tr><td><code>{{commandId}}</code></td><td>{{type}}{{#assets}}<br><span class="muted">{{assets}}</span>{{/assets}}</td>
        <td><a href="{{deviceHref}}">{{deviceId}}</a></td><td><span class="state {{state}}">{{state}}</span></td>
        <td>{{created}}</td><td>{{delivered}}</td><td>{{completed}}</td><td>{{reason}}</td>
        <td>{{#cancelAction}}<form method="post" action="{{cancelAction}}" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit">Cancel</button></form>{{/cancelAction}}</td></tr>
        {{/commands}}
        {{^commands}}<tr><td colspan="9" class="muted">No commands.</td></tr>{{/commands}}
        </tbody>
        </table>
        """

    static let pager = """
        {{#next}}<p class="pager"><a href="{{next}}" rel="next">Next page</a></p>{{/next}}
        """

    static let user = """
        <p>{{enabledCount}} of {{limitText}} download-enabled devices in use.</p>
        <table>
        <thead><tr><th>Device</th><th>Nickname</th><th>Platform</th><th>Last seen</th><th>State</th><th>Download</th></tr></thead>
        <tbody>
        {{#devices}}
        <tr><td><a href="{{href}}">{{deviceId}}</a></td><td>{{nickname}}</td><td>{{platform}} {{model}}</td><td>{{lastSeen}}</td><td>{{state}}</td>
        <td>{{#toggleAction}}<form method="post" action="{{toggleAction}}" class="inline"><input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="enabled" value="{{toggleValue}}"><input type="hidden" name="back" value="user"><button type="submit">{{toggleLabel}}</button></form>{{/toggleAction}}</td></tr>
        {{/devices}}
        {{^devices}}<tr><td colspan="6" class="muted">No registered devices.</td></tr>{{/devices}}
        </tbody>
        </table>
        <h2>Downloads</h2>
        <table>
        <thead><tr><th>Asset</th><th>Device</th><th>State</th><th>Granted</th><th>Released</th></tr></thead>
        <tbody>
        {{#grants}}<tr><td>{{assetId}}</td><td><a href="{{deviceHref}}">{{deviceId}}</a></td><td>{{state}}</td><td>{{granted}}</td><td>{{released}}</td></tr>{{/grants}}
        {{^grants}}<tr><td colspan="5" class="muted">No download grants.</td></tr>{{/grants}}
        </tbody>
        </table>
        {{>pager}}
        """

    static let device = """
        <dl class="profile">
        {{#profile}}<dt>{{label}}</dt><dd>{{#href}}<a href="{{href}}">{{value}}</a>{{/href}}{{^href}}{{value}}{{/href}}</dd>{{/profile}}
        </dl>
        {{#registered}}
        <h2>Actions</h2>
        <div class="actions">
        <form method="post" action="{{toggleAction}}" class="inline"><input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="enabled" value="{{toggleValue}}"><button type="submit">{{toggleLabel}}</button></form>
        {{#commandTypes}}
        <form method="post" action="{{commandAction}}" class="inline"><input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="type" value="{{type}}">{{#needsAssets}}<label>Asset ids <input name="assetIds" placeholder="a1, a2" required></label>{{/needsAssets}}
        <button type="submit"{{#destructive}} class="danger"{{/destructive}}>{{label}}</button></form>
        {{/commandTypes}}
        </div>
        {{/registered}}
        <h2>Commands</h2>
        {{>commandTable}}
        {{>pager}}
        <h2>Licenses</h2>
        <table>
        <thead><tr><th>License</th><th>Asset</th><th>System</th><th>Key ids</th><th>Issued</th><th>Ends</th><th>State</th></tr></thead>
        <tbody>
        {{#licenses}}<tr><td>{{licenseId}}</td><td><a href="{{assetHref}}">{{assetId}}</a></td><td>{{system}}</td><td>{{kids}}</td><td>{{issued}}</td><td>{{expires}}</td><td>{{state}}</td></tr>{{/licenses}}
        {{^licenses}}<tr><td colspan="7" class="muted">No licenses.</td></tr>{{/licenses}}
        </tbody>
        </table>
        """

    static let asset = """
        <h2>Content keys</h2>
        <p class="muted">Key ids only: a key is shown once, in the answer that generated it.</p>
        <table>
        <thead><tr><th>Key id</th><th>Added</th></tr></thead>
        <tbody>
        {{#keys}}<tr><td><code>{{kid}}</code></td><td>{{created}}</td></tr>{{/keys}}
        {{^keys}}<tr><td colspan="2" class="muted">No content keys: ClearKey licenses of this asset are refused (noContentKeys).</td></tr>{{/keys}}
        </tbody>
        </table>
        <h2>License servers</h2>
        <table>
        <thead><tr><th>System</th><th>URL</th><th>Headers</th><th>Updated</th></tr></thead>
        <tbody>
        {{#servers}}<tr><td>{{system}}</td><td>{{url}}</td><td>{{headers}}</td><td>{{updated}}</td></tr>{{/servers}}
        {{^servers}}<tr><td colspan="4" class="muted">None: only ClearKey is answered.</td></tr>{{/servers}}
        </tbody>
        </table>
        """

    static let commands = """
        <form method="get" action="/console/commands" class="filters">
        <label>State <select name="state"><option value="">any</option>{{#states}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/states}}</select></label>
        <label>Type <select name="type"><option value="">any</option>{{#types}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/types}}</select></label>
        <button type="submit">Filter</button>
        </form>
        {{>commandTable}}
        {{>pager}}
        """

    static let feeds = """
        <table>
        <thead><tr><th>Feed</th><th>Title</th><th>Subscribers</th><th>Updated</th></tr></thead>
        <tbody>
        {{#feeds}}<tr><td><a href="{{href}}">{{feedId}}</a></td><td>{{title}}</td><td>{{subscribers}}</td><td>{{updated}}</td></tr>{{/feeds}}
        {{^feeds}}<tr><td colspan="4" class="muted">No feeds yet: the CMS API creates them.</td></tr>{{/feeds}}
        </tbody>
        </table>
        """

    static let feed = """
        <p>{{title}} · {{subscribers}} subscribed devices</p>
        {{#canEdit}}
        <h2>Publish an episode</h2>
        <form method="post" action="{{publishAction}}" class="stacked">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="assetId">Asset id</label><input id="assetId" name="assetId" required>
        <label for="title">Title</label><input id="title" name="title">
        <label for="downloadURL">Download URL</label><input id="downloadURL" name="downloadURL" type="url">
        <button type="submit">Publish</button>
        </form>
        {{/canEdit}}
        <h2>Episodes</h2>
        <table>
        <thead><tr><th>Asset</th><th>Title</th><th>Published</th><th>Expires</th><th>Updated</th><th></th></tr></thead>
        <tbody>
        {{#episodes}}
        <tr><td>{{assetId}}</td><td>{{title}}</td><td>{{publishDate}}</td><td>{{expiryDate}}</td><td>{{updated}}</td>
        <td>{{#retractAction}}<form method="post" action="{{retractAction}}" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" class="danger">Retract</button></form>{{/retractAction}}</td></tr>
        {{/episodes}}
        {{^episodes}}<tr><td colspan="6" class="muted">No live episodes.</td></tr>{{/episodes}}
        </tbody>
        </table>
        {{>pager}}
        """

    static let events = """
        <form method="get" action="/console/events" class="filters">
        <label>User <input name="userId" value="{{userId}}"></label>
        <label>Device <input name="deviceId" value="{{deviceId}}"></label>
        <label>Type <select name="type"><option value="">any</option>{{#types}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/types}}</select></label>
        <label>From <input name="from" value="{{from}}" placeholder="2026-01-01T00:00:00Z"></label>
        <label>To <input name="to" value="{{to}}" placeholder="2026-02-01T00:00:00Z"></label>
        <button type="submit">Filter</button>
        </form>
        {{#filterError}}<p class="error" role="alert">{{filterError}}</p>{{/filterError}}
        {{^filterError}}
        <p class="exports">Export these events: <a href="{{csvHref}}">CSV</a> · <a href="{{ndjsonHref}}">NDJSON</a></p>
        <h2>Per day</h2>
        {{>chart}}
        <h2>Events</h2>
        <table>
        <thead><tr><th>Time (corrected)</th><th>Type</th><th>Device</th><th>User</th><th>Asset</th><th>Detail</th></tr></thead>
        <tbody>
        {{#rows}}<tr><td>{{time}}</td><td>{{type}}</td><td>{{#deviceHref}}<a href="{{deviceHref}}">{{deviceId}}</a>{{/deviceHref}}{{^deviceHref}}{{deviceId}}{{/deviceHref}}</td><td>{{userId}}</td><td>{{assetId}}</td><td>{{detail}}</td></tr>{{/rows}}
        {{^rows}}<tr><td colspan="6" class="muted">No events match.</td></tr>{{/rows}}
        </tbody>
        </table>
        {{>pager}}
        {{/filterError}}
        """

    static let settings = """
        <form method="post" action="/console/settings" class="settings" novalidate>
        <input type="hidden" name="csrf" value="{{csrf}}">
        {{#fields}}
        <div class="field{{#error}} invalid{{/error}}">
        <label for="{{name}}">{{label}}</label>
        <input id="{{name}}" name="{{name}}" value="{{value}}" inputmode="numeric"{{#error}} aria-invalid="true" aria-describedby="{{name}}-error"{{/error}}>
        <span class="help">{{help}}</span>
        {{#error}}<span class="error" id="{{name}}-error">{{error}}</span>{{/error}}
        </div>
        {{/fields}}
        <p class="muted">-1 means unlimited. Devices receive the new settings at their next sync.</p>
        <button type="submit">Save settings</button>
        </form>
        {{#identity}}
        <h2 id="user-tokens">User tokens</h2>
        <p class="muted">A JWT the app's own backend signs for its signed-in user, checked before a device is registered to that user
        or moved to another (<code>X-Backplane-User-Token</code>). Accepted: ES256, RS256, EdDSA, or HS256 with a shared secret.</p>
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        <form method="post" action="/console/settings/user-identity" class="stacked" novalidate>
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label><input type="checkbox" name="required" value="on"{{#required}} checked{{/required}}> Required: refuse registrations without a valid token</label>
        <label for="issuer">Issuer (iss)</label><input id="issuer" name="issuer" value="{{issuer}}">
        <label for="audience">Audience (aud)</label><input id="audience" name="audience" value="{{audience}}">
        <label for="jwks">Public keys (a JSON Web Key Set)</label><textarea id="jwks" name="jwks" rows="6">{{jwks}}</textarea>
        {{#jwksUrlAllowed}}<label for="jwksUrl">Or a key set URL (https), fetched by the backplane</label><input id="jwksUrl" name="jwksUrl" value="{{jwksUrl}}">{{/jwksUrlAllowed}}
        {{^jwksUrlAllowed}}{{#jwksUrl}}<p class="muted">Keys at {{jwksUrl}}, which this server does not fetch (serve --allow-jwks-url).</p>{{/jwksUrl}}{{/jwksUrlAllowed}}
        <label for="hs256Secret">Shared HS256 secret {{#secretSet}}(one is set; leave empty to keep it){{/secretSet}}</label>
        <input id="hs256Secret" name="hs256Secret" type="password" autocomplete="off">
        {{#secretSet}}<label><input type="checkbox" name="removeSecret" value="on"> Remove the shared secret</label>{{/secretSet}}
        <button type="submit">Save user tokens</button>
        </form>
        {{#configured}}
        <form method="post" action="/console/settings/user-identity/delete" class="inline">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <button type="submit" class="danger">Remove user tokens</button>
        </form>
        {{/configured}}
        {{/identity}}
        {{#push}}
        <h2 id="push">Push wake-ups</h2>
        <p class="muted">A device whose app is not running is woken for its commands through Apple's (APNs) or Google's (FCM)
        push service. Keys are stored as secrets and never shown again.</p>
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        <h3>APNs (iOS, iPadOS, tvOS)</h3>
        {{#apns}}{{#configured}}<p>Set {{setAt}}: {{summary}}.</p>{{/configured}}{{^configured}}<p class="muted">Not set: Apple devices are not pushed.</p>{{/configured}}
        {{#broken}}<p class="error" role="alert">{{broken}}</p>{{/broken}}{{/apns}}
        <form method="post" action="/console/settings/push/apns" class="stacked" novalidate>
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="teamId">Team id</label><input id="teamId" name="teamId" value="{{teamId}}">
        <label for="keyId">Key id</label><input id="keyId" name="keyId" value="{{keyId}}">
        <label for="topic">Bundle id (topic)</label><input id="topic" name="topic" value="{{topic}}">
        <label for="environment">Environment</label>
        <select id="environment" name="environment"><option value="production">production (App Store, TestFlight)</option>
        <option value="sandbox"{{#sandbox}} selected{{/sandbox}}>sandbox (development builds)</option></select>
        <label for="privateKey">The .p8 key file's text</label><textarea id="privateKey" name="privateKey" rows="5" autocomplete="off"></textarea>
        <button type="submit">Save APNs key</button>
        </form>
        {{#apns}}{{#configured}}<form method="post" action="/console/settings/push/apns/delete" class="inline">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <button type="submit" class="danger">Remove APNs key</button>
        </form>{{/configured}}{{/apns}}
        <h3>FCM (Android)</h3>
        {{#fcm}}{{#configured}}<p>Set {{setAt}}: {{summary}}.</p>{{/configured}}{{^configured}}<p class="muted">Not set: Android devices are not pushed.</p>{{/configured}}
        {{#broken}}<p class="error" role="alert">{{broken}}</p>{{/broken}}{{/fcm}}
        <form method="post" action="/console/settings/push/fcm" class="stacked" novalidate>
        <input type="hidden" name="csrf" value="{{csrf}}">
        <label for="serviceAccount">The service account's JSON key file</label>
        <textarea id="serviceAccount" name="serviceAccount" rows="6" autocomplete="off"></textarea>
        <button type="submit">Save service account</button>
        </form>
        {{#fcm}}{{#configured}}<form method="post" action="/console/settings/push/fcm/delete" class="inline">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <button type="submit" class="danger">Remove service account</button>
        </form>{{/configured}}{{/fcm}}
        {{/push}}
        """

    static let tokens = """
        {{#created}}
        <div class="created" role="status">
        <p><strong>{{label}}</strong> Copy it now: it is shown this once, and only its hash is kept.</p>
        <p><code class="secret">{{secret}}</code></p>
        </div>
        {{/created}}
        <h2>Bearer tokens</h2>
        <table>
        <thead><tr><th>Name</th><th>Scope</th><th>Created</th><th>Expires</th><th>Last used</th><th>State</th><th></th></tr></thead>
        <tbody>
        {{#tokens}}
        <tr><td>{{name}} <span class="muted">{{tokenId}}</span></td><td>{{scope}}</td><td>{{created}}</td><td>{{expires}}</td><td>{{lastUsed}}</td><td>{{state}}</td>
        <td>{{#revokeAction}}<form method="post" action="{{revokeAction}}" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" class="danger">Revoke</button></form>{{/revokeAction}}</td></tr>
        {{/tokens}}
        </tbody>
        </table>
        <form method="post" action="/console/tokens" class="stacked">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <h3>New token</h3>
        <label for="name">Name</label><input id="name" name="name" required>
        <label for="scope">Scope</label><select id="scope" name="scope"><option value="cms">cms</option><option value="reporting">reporting</option></select>
        <label for="expiresInDays">Expires in days (empty: never)</label><input id="expiresInDays" name="expiresInDays" inputmode="numeric">
        <button type="submit">Create token</button>
        <p class="muted">Admin tokens are made on the server with <code>backplane token create</code>.</p>
        </form>
        <h2>App keys</h2>
        <table>
        <thead><tr><th>Key</th><th>Created</th><th>Last used</th><th>State</th><th></th></tr></thead>
        <tbody>
        {{#keys}}
        <tr><td><code>{{keyId}}</code></td><td>{{created}}</td><td>{{lastUsed}}</td><td>{{state}}</td>
        <td>{{#revokeAction}}<form method="post" action="{{revokeAction}}" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" class="danger">Revoke</button></form>{{/revokeAction}}</td></tr>
        {{/keys}}
        </tbody>
        </table>
        <form method="post" action="/console/keys" class="inline">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <button type="submit">Create app key</button>
        </form>
        """
}
