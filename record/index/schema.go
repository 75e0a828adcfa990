package index

// tables holds the schema, secondary indexes apart (see indexes).
var tables = []string{
	`CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS sessions(
		sid INTEGER PRIMARY KEY,
		session_id TEXT NOT NULL UNIQUE,
		first_ts INTEGER, last_ts INTEGER,
		events INTEGER NOT NULL DEFAULT 0,
		procs INTEGER NOT NULL DEFAULT 0,
		files INTEGER NOT NULL DEFAULT 0,
		nets INTEGER NOT NULL DEFAULT 0,
		pkgs INTEGER NOT NULL DEFAULT 0,
		alerts INTEGER NOT NULL DEFAULT 0,
		lost INTEGER NOT NULL DEFAULT 0,
		end_ts INTEGER, end_reason TEXT, exit_status INTEGER)`,
	`CREATE TABLE IF NOT EXISTS events(
		seq INTEGER PRIMARY KEY,
		ts INTEGER NOT NULL,
		sid INTEGER NOT NULL,
		kind TEXT NOT NULL,
		source TEXT NOT NULL,
		pid INTEGER,
		exe TEXT,
		raw TEXT NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS paths(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE)`,
	`CREATE TABLE IF NOT EXISTS domains(id INTEGER PRIMARY KEY, rdomain TEXT NOT NULL UNIQUE)`,
	`CREATE TABLE IF NOT EXISTS packages(id INTEGER PRIMARY KEY, ecosystem TEXT NOT NULL, name TEXT NOT NULL,
		version TEXT NOT NULL, UNIQUE(ecosystem, name, version))`,
	`CREATE TABLE IF NOT EXISTS files(seq INTEGER NOT NULL, sid INTEGER NOT NULL, ts INTEGER NOT NULL, path_id INTEGER NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS nets(seq INTEGER NOT NULL, sid INTEGER NOT NULL, ts INTEGER NOT NULL,
		domain_id INTEGER, dst_ip TEXT, dst_port INTEGER)`,
	`CREATE TABLE IF NOT EXISTS pkgs(seq INTEGER NOT NULL, sid INTEGER NOT NULL, ts INTEGER NOT NULL,
		pkg_id INTEGER NOT NULL, purl TEXT)`,
	`CREATE TABLE IF NOT EXISTS skipped(seq INTEGER PRIMARY KEY, error TEXT NOT NULL)`,
	// The rollups: which sessions have any row of a key. "Which sessions
	// installed X" reads one row per session here instead of one per
	// event in the side table.
	`CREATE TABLE IF NOT EXISTS path_sessions(path_id INTEGER NOT NULL, sid INTEGER NOT NULL, PRIMARY KEY(path_id, sid)) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS domain_sessions(domain_id INTEGER NOT NULL, sid INTEGER NOT NULL, PRIMARY KEY(domain_id, sid)) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS pkg_sessions(pkg_id INTEGER NOT NULL, sid INTEGER NOT NULL, PRIMARY KEY(pkg_id, sid)) WITHOUT ROWID`,
}

// indexes are the secondary indexes, one or more per question. Each side
// table's index covers its questions, so they never touch the table. The
// dictionaries (paths, domains, packages) have their UNIQUE indexes from
// the start: a filter first finds the matching keys there (a range of
// paths, the versions of a package), then the side rows of those keys.
var indexes = []string{
	`CREATE INDEX IF NOT EXISTS events_sid_ts ON events(sid, ts)`,     // 5: the timeline
	`CREATE INDEX IF NOT EXISTS events_ts ON events(ts)`,              // time windows
	`CREATE INDEX IF NOT EXISTS events_kind ON events(kind, ts, sid)`, // --kind, and which sessions had one
	`CREATE INDEX IF NOT EXISTS files_path ON files(path_id, sid, ts, seq)`,
	`CREATE INDEX IF NOT EXISTS nets_domain ON nets(domain_id, sid, ts, seq) WHERE domain_id IS NOT NULL`,
	`CREATE INDEX IF NOT EXISTS nets_ip ON nets(dst_ip, ts) WHERE dst_ip IS NOT NULL`, // the hunt's addresses
	`CREATE INDEX IF NOT EXISTS pkgs_pkg ON pkgs(pkg_id, sid, ts, seq)`,
	`CREATE INDEX IF NOT EXISTS sessions_reason ON sessions(end_reason) WHERE end_reason IS NOT NULL`,
}
