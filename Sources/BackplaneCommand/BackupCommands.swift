import ArgumentParser
import Backplane
import Foundation

struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a consistent copy of the embedded database to a new file, while serve runs.",
        discussion: """
            Uses SQLite's backup API from one read transaction: the copy is the database as of one commit, however busy \
            the server is. The file is owner-only (it holds the app key secrets). With PostgreSQL, use pg_dump instead.
            """)
    @Option(help: "The file to write; it must not exist.") var to: String
    @OptionGroup var data: StoreOptions

    func validate() throws {
        guard data.databaseURL == nil else { throw ValidationError("backup copies the embedded SQLite store; back PostgreSQL up with pg_dump.") }
    }

    func run() async throws {
        let summary = try SQLiteBackup.backup(directory: data.url, to: URL(fileURLWithPath: to))
        print("Backed up \(data.dataDir) to \(to): \(summary).")
        if let note = summary.keyEncryptionNote { print(note) }
    }
}

struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a backup the database of a data directory (stop serve first).",
        discussion: """
            Refuses while a backplane serves the directory. A database already there is kept beside it as \
            backplane.sqlite.before-restore-<time>, not deleted. The backup is checked (integrity, a backplane schema this \
            version knows) before anything is replaced; serve then migrates it if it is older.
            """)
    @Option(help: "The backup file (from 'backplane backup').") var from: String
    @OptionGroup var data: StoreOptions

    func validate() throws {
        guard data.databaseURL == nil else { throw ValidationError("restore fills a data directory; restore PostgreSQL with pg_restore.") }
    }

    func run() async throws {
        let (summary, aside) = try SQLiteBackup.restore(from: URL(fileURLWithPath: from), into: data.url)
        if let aside { print("The database that was there is kept as \(aside).") }
        print("Restored \(from) into \(data.dataDir): \(summary).")
        if let note = summary.keyEncryptionNote { print(note) }
    }
}
