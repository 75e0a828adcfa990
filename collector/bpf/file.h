/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record of file.c and its constants, exported to Go by bpf2go -type.
 * Every file operation is one record kind (KIND_FILE); the op is in the
 * record. A ptrace request is a record of the same kind (FILE_OP_PTRACE),
 * since the same program on the syscall exits builds it; Go makes it a
 * process.ptrace event.
 */
#ifndef SANDTRAIL_FILE_H
#define SANDTRAIL_FILE_H

/* The operation, as the Go side names it in the event kind (file.<op>). */
enum file_op {
	FILE_OP_READ = 1,
	FILE_OP_WRITE = 2,
	FILE_OP_CREATE = 3,
	FILE_OP_DELETE = 4,
	FILE_OP_RENAME = 5,
	FILE_OP_MOUNT = 6,
	FILE_OP_TRUNCATE = 7,
	FILE_OP_CHMOD = 8,
	/* symlink(at), link(at): the link is the path, the target is the
	 * new path (a hard link's existing file) or the source (a symbolic
	 * link's target, as given). */
	FILE_OP_LINK = 9,
	/* ptrace(2) attach, seize or traceme: flags is the request,
	 * target_pid its pid. */
	FILE_OP_PTRACE = 10,
	FILE_OP_MAX = 11,
};

/* The syscalls traced: Go attaches file_exit to the sys_exit tracepoint of
 * each with this id as the attach cookie. */
enum file_sys {
	FILE_SYS_OPENAT = 1,
	FILE_SYS_OPENAT2,
	FILE_SYS_OPEN,
	FILE_SYS_CREAT,
	FILE_SYS_UNLINKAT,
	FILE_SYS_UNLINK,
	FILE_SYS_RMDIR,
	FILE_SYS_RENAMEAT2,
	FILE_SYS_RENAMEAT,
	FILE_SYS_RENAME,
	FILE_SYS_MOUNT,
	FILE_SYS_UMOUNT2,
	FILE_SYS_MOVE_MOUNT,
	FILE_SYS_TRUNCATE,
	FILE_SYS_FTRUNCATE,
	FILE_SYS_CHMOD,
	FILE_SYS_FCHMODAT,
	FILE_SYS_FCHMODAT2,
	FILE_SYS_FCHMOD,
	FILE_SYS_MKDIRAT,
	FILE_SYS_MKDIR,
	FILE_SYS_SYMLINKAT,
	FILE_SYS_SYMLINK,
	FILE_SYS_LINKAT,
	FILE_SYS_LINK,
	FILE_SYS_PTRACE,
};

/* The parts of file_event.data, in order; len[part] is each one's length.
 * A WALK part holds path components from the leaf up, each NUL-terminated;
 * the other parts are strings copied from the caller, without their NUL. */
enum file_part {
	/* The path resolved by the kernel: the walk of the struct file's
	 * f_path. When present the path needs nothing else. */
	FILE_PART_WALK = 0,
	/* The path as the caller passed it, and, when it is relative, the
	 * walk of the directory it is relative to (the dirfd or the cwd). */
	FILE_PART_PATH = 1,
	FILE_PART_BASE = 2,
	/* The same for the new path of a rename (or the target of a
	 * move_mount, or the existing file of a hard link). */
	FILE_PART_NEW_PATH = 3,
	FILE_PART_NEW_BASE = 4,
	/* mount(2)'s source and file system type (move_mount's from path, a
	 * symbolic link's target). */
	FILE_PART_SOURCE = 5,
	FILE_PART_FSTYPE = 6,
	FILE_PARTS = 8,
};

/* file_event.rflags. */
enum file_record_flags {
	/* A walk ended before the root (too deep or too long); the path is
	 * written as "…/a/b". */
	FILE_WALK_CUT = 1,
	FILE_BASE_CUT = 2,
	FILE_NEW_BASE_CUT = 4,
	/* A string from the caller did not fit or could not be read. */
	FILE_STRING_CUT = 8,
	/* A read that the kernel could not decide (a failed open, or one
	 * more than FILE_NODE_DEPTH missing components beneath the nearest
	 * directory that existed when a rule was registered): Go keeps it
	 * only when its path is sensitive. */
	FILE_CHECK_PATH = 16,
	/* The operation is umount2 (op FILE_OP_MOUNT, flags are umount2's). */
	FILE_UMOUNT = 32,
	/* The operation is move_mount (op FILE_OP_MOUNT). */
	FILE_MOVE_MOUNT = 64,
	/* The path is the WALK part (the operation had a struct file). */
	FILE_PATH_WALKED = 128,
	/* A relative path's dirfd was not open: there is no base. */
	FILE_NO_BASE = 256,
	FILE_NO_NEW_BASE = 512,
	/* The entry created is a directory (mkdir, mkdirat). */
	FILE_DIR = 1024,
	/* The link is a symbolic link (symlink, symlinkat). */
	FILE_SYMLINK = 2048,
};

/* Verdicts in file_sensitive: what a read beneath a registered name is.
 * A value is a verdict in its low FILE_NODE_SHIFT bits and, for a name
 * that did not exist when it was registered, a node number above them:
 * the names beneath it are keys whose ino is FILE_NODE_INO | node (a trie
 * of the missing components of the rules beneath it, which the kernel
 * follows down from the name it found; the deepest name found decides). */
enum file_verdict {
	FILE_SENSITIVE = 1,
	FILE_EXCEPTION = 2,
	/* Go decides by the path (a rule deeper than the trie goes). */
	FILE_MAYBE = 3,
	FILE_VERDICT_MASK = 0xff,
	FILE_NODE_SHIFT = 8,
	/* How many missing components the trie follows. */
	FILE_NODE_DEPTH = 8,
};

/* The ino of the keys beneath trie node n is FILE_NODE_INO | n. An inode
 * number with the top bit set would only cost a lookup. */
#define FILE_NODE_INO (1ULL << 63)

/* file_settings keys (an array of u32). */
enum file_config {
	/* FILE_READS_NONE, _MAP or _ALL. */
	FILE_CONFIG_READS = 0,
	FILE_CONFIG_MAX = 1,
};

enum file_reads {
	FILE_READS_NONE = 0,
	FILE_READS_MAP = 1,
	FILE_READS_ALL = 2,
};

enum file_limits {
	/* Bytes of a name kept in a file_sensitive key. */
	FILE_KEY_NAME = 56,
	FILE_STRING_MAX = 4096,
};

/* file_anchor is a bit set (Go computes the same bits): a directory with
 * inode number ino is bit (ino * FILE_ANCHOR_MUL) >> (64 - FILE_ANCHOR_LOG);
 * an entry of that directory whose name has len bytes (1 to 39) and whose
 * first eight bytes, zero-padded and read little-endian, are w is bit
 * (((ino ^ len << 56) * FILE_ANCHOR_MUL ^ w) * FILE_NAME_MUL) >> (64 - FILE_ANCHOR_LOG). */
#define FILE_ANCHOR_LOG 18
#define FILE_ANCHOR_WORDS (1 << (FILE_ANCHOR_LOG - 6))
#define FILE_ANCHOR_MUL 0x9e3779b97f4a7c15ULL
#define FILE_NAME_MUL 0xff51afd7ed558ccdULL

/* Offsets of the parts are masked below 16 KiB; a part is at most 4 KiB. */
#define FILE_DATA_MASK 0x3fff
#define FILE_DATA_SIZE (16384 + 4096)

/* A key of file_sensitive: the directory entry `name` in the directory with
 * inode number ino. The device is left out on purpose: stat(2)'s st_dev can
 * differ from the super block's s_dev (btrfs subvolumes), and a key that
 * missed would lose sensitive reads silently, while an inode number that
 * collides on another file system only records more reads. Names longer
 * than FILE_KEY_NAME - 1 bytes are cut. */
struct file_key {
	__u64 ino;
	char name[FILE_KEY_NAME];
};

/* One file operation. */
struct file_event {
	struct event_header hdr;
	__u32 uid;
	__u32 op;     /* enum file_op */
	__s64 ret;    /* the syscall's return value (negative errno) */
	__u32 flags;  /* open(2) or mount(2) flags, or the new mode */
	__u32 rflags; /* enum file_record_flags */
	__u32 target_pid; /* ptrace's pid argument (traceme: the parent's) */
	__u32 len[FILE_PARTS];
	char data[FILE_DATA_SIZE];
};

#endif
