// The console's Mustache templates, compiled into the binary: the backplane is one file to
// deploy, with nothing to find at run time. `{{value}}` is always HTML-escaped; no template uses
// `{{{…}}}` but the layout's `body`. No template carries a script or a style attribute: the
// Content-Security-Policy allows neither (`ConsoleSecurity`).

enum ConsoleTemplates {
    static let layout = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}} · Backplane console</title>
        <link rel="stylesheet" href="/console/static/console.css">
        <link rel="icon" href="/console/static/favicon.svg" type="image/svg+xml">
        </head>
        <body>
        {{#signedIn}}
        <header>
        <nav aria-label="Console">
        <a class="brand" href="/console">Backplane</a>
        {{#nav}}<a href="{{href}}"{{#current}} aria-current="page"{{/current}}>{{label}}</a>{{/nav}}
        </nav>
        <form method="post" action="/console/sign-out" class="sign-out">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <span class="who">{{tokenName}} · {{scope}}</span>
        <button type="submit">Sign out</button>
        </form>
        </header>
        {{/signedIn}}
        <main>
        <h1>{{title}}</h1>
        {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
        {{{body}}}
        </main>
        </body>
        </html>
        """

    static let pages: [String: String] = [
        "sign-in": signIn, "error": error, "confirm": confirm, "overview": overview, "find": find,
        "user": user, "device": device, "commands": commands, "feeds": feeds, "feed": feed,
        "events": events, "settings": settings, "tokens": tokens, "asset": asset,
    ]

    static let signIn = """
        <p>Sign in with a bearer token of this backplane: an <strong>admin</strong> token (from
        <code>backplane token create</code> on the server) opens every page; a <strong>cms</strong>
        token the feeds; a <strong>reporting</strong> token the event log.</p>
        {{#message}}<p class="error" role="alert">{{message}}</p>{{/message}}
        <form method="post" action="/console/sign-in" class="stacked">
        <input type="hidden" name="signin" value="{{signInToken}}">
        <label for="token">Token</label>
        <input id="token" name="token" type="password" autocomplete="off" required>
        <button type="submit">Sign in</button>
        </form>
        """

    static let error = """
        <p class="error" role="alert">{{message}}</p>
        <p class="muted">Error code: <code>{{code}}</code></p>
        <p><a href="/console">Back to the console</a></p>
        """

    /// Every command and every destructive change asks first; without JavaScript, the question is
    /// a page of its own whose button sends the same form again with `confirm` set.
    static let confirm = """
        <p class="warning">{{question}}</p>
        <form method="post" action="{{action}}" class="inline">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="confirm" value="yes">
        {{#fields}}<input type="hidden" name="{{name}}" value="{{value}}">{{/fields}}
        <button type="submit" class="danger">{{button}}</button>
        <a href="{{cancelHref}}">Cancel</a>
        </form>
        """

    static let overview = """
        <section class="cards" aria-label="Fleet">
        {{#cards}}
        <a class="card" href="{{href}}"><span class="value">{{value}}</span><span class="label">{{label}}</span>{{#note}}<span class="note">{{note}}</span>{{/note}}</a>
        {{/cards}}
        </section>
        <h2>Events per day</h2>
        {{>chart}}
        """

    static let find = """
        <form method="get" action="/console/find" class="search" role="search">
        <label for="q">User id, device id, external device id or nickname</label>
        <input id="q" name="q" value="{{query}}" required>
        <button type="submit">Find</button>
        </form>
        {{#searched}}
        {{#userHref}}<p>User <a href="{{userHref}}">{{query}}</a> has devices.</p>{{/userHref}}
        {{#truncated}}<p class="muted">Many devices match: only the first page of each kind of match is shown. The user page lists all of a user's devices.</p>{{/truncated}}
        {{#hasDevices}}{{>deviceTable}}{{/hasDevices}}
        {{#nothingFound}}<p class="muted">Nothing matches “{{query}}”.</p>{{/nothingFound}}
        {{/searched}}
        """
}
