-- The central store's tables: the SQLite index's (record/index), keyed by
-- host (hid) as well as seq, the big ones partitioned by the day the
-- aggregator received the entry (day: days since 1970-01-01, UTC), and
-- the chain state of each host's journal.
--
-- Every text column that a question compares or ranges over is COLLATE "C",
-- so that ranges are byte ranges, as in SQLite.

CREATE TABLE hosts(
	hid integer PRIMARY KEY,
	host text COLLATE "C" NOT NULL UNIQUE);
-- The central store's own host: its integrity alerts are entries of hid 0.
INSERT INTO hosts(hid, host) VALUES (0, '');
CREATE SEQUENCE hosts_hid START 1 OWNED BY hosts.hid;
CREATE SEQUENCE central_seq START 0 MINVALUE 0;

-- A session belongs to the host of its first entry (hid): another host's
-- entries that name it are kept as skipped, and raise session_conflict,
-- so that no host can write into another's session.
CREATE TABLE sessions(
	sid bigserial PRIMARY KEY,
	session_id text COLLATE "C" NOT NULL UNIQUE,
	hid integer,
	first_ts bigint, last_ts bigint,
	events bigint NOT NULL DEFAULT 0,
	procs bigint NOT NULL DEFAULT 0,
	files bigint NOT NULL DEFAULT 0,
	nets bigint NOT NULL DEFAULT 0,
	pkgs bigint NOT NULL DEFAULT 0,
	alerts bigint NOT NULL DEFAULT 0,
	lost bigint NOT NULL DEFAULT 0,
	end_ts bigint, end_reason text COLLATE "C", exit_status integer);
CREATE INDEX sessions_reason ON sessions(end_reason) WHERE end_reason IS NOT NULL;
CREATE INDEX sessions_first ON sessions(first_ts, sid);

-- entries makes a write idempotent on (hid, seq) and keeps each entry's
-- Merkle leaf hash, which the chain verification reads in seq order.
CREATE TABLE entries(
	hid integer NOT NULL,
	seq bigint NOT NULL,
	day integer NOT NULL,
	leaf bytea NOT NULL,
	PRIMARY KEY(hid, seq));

CREATE TABLE events(
	hid integer NOT NULL,
	seq bigint NOT NULL,
	day integer NOT NULL,
	ts bigint NOT NULL,
	sid bigint NOT NULL,
	kind text COLLATE "C" NOT NULL,
	source text COLLATE "C" NOT NULL,
	pid integer,
	exe text,
	raw text NOT NULL,
	PRIMARY KEY(hid, seq, day)) PARTITION BY RANGE (day);
CREATE INDEX events_sid_ts ON events(sid, ts);
CREATE INDEX events_ts ON events(ts);
CREATE INDEX events_kind ON events(kind, ts, sid);

-- A path can be longer than a btree key may be (4,096 bytes against about
-- 2,700): the index holds its first 600 characters (path_key, which
-- index.PathKey names), and a question checks the whole path beside it.
-- The paths are not unique: two aggregators adding one path at once may
-- give it two ids, which every question treats as one path.
CREATE TABLE paths(id bigserial PRIMARY KEY, path text COLLATE "C" NOT NULL,
	path_key text COLLATE "C" GENERATED ALWAYS AS (left(path, 600)) STORED);
CREATE INDEX paths_key ON paths(path_key);
CREATE TABLE domains(id bigserial PRIMARY KEY, rdomain text COLLATE "C" NOT NULL UNIQUE);
CREATE TABLE packages(id bigserial PRIMARY KEY, ecosystem text COLLATE "C" NOT NULL, name text COLLATE "C" NOT NULL,
	version text COLLATE "C" NOT NULL, UNIQUE(ecosystem, name, version));

CREATE TABLE files(hid integer NOT NULL, seq bigint NOT NULL, day integer NOT NULL, sid bigint NOT NULL, ts bigint NOT NULL,
	path_id bigint NOT NULL) PARTITION BY RANGE (day);
CREATE INDEX files_path ON files(path_id, sid, ts, seq);
CREATE TABLE nets(hid integer NOT NULL, seq bigint NOT NULL, day integer NOT NULL, sid bigint NOT NULL, ts bigint NOT NULL,
	domain_id bigint, dst_ip text COLLATE "C", dst_port integer) PARTITION BY RANGE (day);
CREATE INDEX nets_domain ON nets(domain_id, sid, ts, seq) WHERE domain_id IS NOT NULL;
CREATE INDEX nets_ip ON nets(dst_ip, ts) WHERE dst_ip IS NOT NULL;
CREATE TABLE pkgs(hid integer NOT NULL, seq bigint NOT NULL, day integer NOT NULL, sid bigint NOT NULL, ts bigint NOT NULL,
	pkg_id bigint NOT NULL, purl text) PARTITION BY RANGE (day);
CREATE INDEX pkgs_pkg ON pkgs(pkg_id, sid, ts, seq);

-- The rollups: which sessions have any row of a key.
CREATE TABLE path_sessions(path_id bigint NOT NULL, sid bigint NOT NULL, PRIMARY KEY(path_id, sid));
CREATE TABLE domain_sessions(domain_id bigint NOT NULL, sid bigint NOT NULL, PRIMARY KEY(domain_id, sid));
CREATE TABLE pkg_sessions(pkg_id bigint NOT NULL, sid bigint NOT NULL, PRIMARY KEY(pkg_id, sid));

-- skipped holds the entries that did not decode as events: their leaves
-- are in entries, and they are in no other table.
CREATE TABLE skipped(hid integer NOT NULL, seq bigint NOT NULL, error text NOT NULL, PRIMARY KEY(hid, seq));

-- checkpoints holds each host's signed checkpoints whose signature
-- verified against the host's key; chains the state of the verification
-- of the host's Merkle tree: the entries folded in (next), the roots of
-- its perfect subtrees (a compact range, stack), the size of the newest
-- checkpoint it matched (verified), and why it stopped, if it did (broken).
CREATE TABLE checkpoints(hid integer NOT NULL, size bigint NOT NULL, root bytea NOT NULL, note text NOT NULL,
	received timestamptz NOT NULL DEFAULT now(), PRIMARY KEY(hid, size));
CREATE TABLE chains(
	hid integer PRIMARY KEY,
	next bigint NOT NULL DEFAULT 0,
	stack bytea NOT NULL DEFAULT '',
	verified bigint NOT NULL DEFAULT 0,
	verified_at timestamptz,
	stalled_since timestamptz,
	broken text);

-- integrity holds each problem the verification found, once per (host,
-- problem, key): the key is the seq, or -1 for a problem raised once per
-- host (an unknown host). The alert event that reported it is entry
-- alert_seq of hid 0.
CREATE TABLE integrity(hid integer NOT NULL, problem text NOT NULL, key bigint NOT NULL, seq bigint NOT NULL,
	detail text NOT NULL, alert_seq bigint NOT NULL, raised timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY(hid, problem, key));
