import Foundation
import Hummingbird

/// The console's two static files, compiled in like the templates. Cached for an hour: a new
/// build's stylesheet reaches browsers within that.
enum ConsoleAssets {
    static let stylesheet = """
        :root { --ink: #1d232b; --muted: #5c6673; --line: #d8dde3; --accent: #1f5fbf; --danger: #b3261e; --bg: #f6f7f9; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: var(--bg); }
        header { display: flex; justify-content: space-between; align-items: center; background: #fff; border-bottom: 1px solid var(--line); padding: 0 1.5rem; }
        nav { display: flex; gap: 1rem; align-items: center; flex-wrap: wrap; }
        nav a { color: var(--muted); text-decoration: none; padding: .9rem 0; border-bottom: 2px solid transparent; }
        nav a[aria-current="page"] { color: var(--ink); border-bottom-color: var(--accent); }
        nav a.brand { color: var(--ink); font-weight: 700; margin-right: .5rem; }
        .sign-out { display: flex; gap: .75rem; align-items: center; }
        .who { color: var(--muted); font-size: .9em; }
        main { max-width: 72rem; margin: 0 auto; padding: 1.5rem; }
        h1 { font-size: 1.5rem; margin: 0 0 1rem; overflow-wrap: anywhere; }
        h2 { font-size: 1.15rem; margin: 2rem 0 .75rem; }
        a { color: var(--accent); }
        table { width: 100%; border-collapse: collapse; background: #fff; border: 1px solid var(--line); }
        th, td { text-align: left; padding: .45rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; overflow-wrap: break-word; }
        th { font-weight: 600; color: var(--muted); font-size: .85em; }
        code { font-size: .9em; }
        .muted { color: var(--muted); }
        .error { color: var(--danger); }
        .warning { font-weight: 600; }
        .notice { background: #e8f1fd; border: 1px solid #b9d3f5; padding: .6rem .8rem; }
        .created { background: #fff8e1; border: 1px solid #f0d48a; padding: .6rem .8rem; }
        .secret { user-select: all; word-break: break-all; }
        .cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(11rem, 1fr)); gap: .75rem; }
        .card { display: flex; flex-direction: column; background: #fff; border: 1px solid var(--line); padding: .9rem; text-decoration: none; color: var(--ink); }
        .card .value { font-size: 1.8rem; font-weight: 700; }
        .card .label { color: var(--muted); }
        .card .note { color: var(--muted); font-size: .8em; }
        .chart { margin: 0; background: #fff; border: 1px solid var(--line); padding: .75rem; }
        .chart svg { width: 100%; height: 10rem; display: block; }
        .chart .axis { display: flex; justify-content: space-between; color: var(--muted); font-size: .8em; }
        .chart .bar { fill: var(--accent); }
        .chart figcaption { color: var(--muted); font-size: .85em; }
        form.inline { display: inline-flex; gap: .5rem; align-items: center; margin: 0 .25rem .25rem 0; }
        form.stacked { display: grid; gap: .35rem; max-width: 28rem; margin: 1rem 0; }
        form.filters, form.search { display: flex; flex-wrap: wrap; gap: .75rem; align-items: end; margin-bottom: 1rem; }
        form.search input { min-width: 22rem; }
        .actions { display: flex; flex-wrap: wrap; gap: .25rem; }
        .settings .field { display: grid; grid-template-columns: 16rem 8rem 1fr; gap: .25rem .75rem; align-items: center; margin-bottom: .6rem; }
        .settings .field .error { grid-column: 2 / 4; }
        .settings .invalid input { border-color: var(--danger); }
        .help { color: var(--muted); font-size: .85em; }
        .profile { display: grid; grid-template-columns: 12rem 1fr; gap: .3rem 1rem; background: #fff; border: 1px solid var(--line); padding: .9rem; }
        .profile dt { color: var(--muted); }
        .profile dd { margin: 0; overflow-wrap: anywhere; }
        input, select, button { font: inherit; padding: .35rem .5rem; }
        button { background: #fff; border: 1px solid var(--line); cursor: pointer; }
        button.danger { color: #fff; background: var(--danger); border-color: var(--danger); }
        .state.failed, .state.expired { color: var(--danger); }
        .state.pending, .state.delivered { color: var(--accent); }
        .pager { margin-top: .75rem; }
        """

    static let favicon = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1f5fbf"/><path d="M4 4h5a3 3 0 0 1 0 6H6v2H4z" fill="#fff"/></svg>
        """

    static func response(_ text: String, contentType: String) -> Response {
        var headers = ConsoleSecurity.pageHeaders(contentType: contentType)
        headers[.cacheControl] = "public, max-age=3600"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
