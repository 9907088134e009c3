// Package member validates what other machines say about themselves, once,
// where a gossip member enters shoal's view. Names, tags and cluster names
// come from any holder of the gossip key, a stock `serf agent` included, so
// they are outside input: [Admit] checks them against the rules below and
// returns the member as the rest of shoal may use it.
//
// # Rules
//
// Name:
//   - 1 to 128 bytes ([MaxNameLen]) of valid UTF-8;
//   - every character printable (strconv.IsPrint: letters, marks, numbers,
//     punctuation, symbols and the ASCII space). This rules out control
//     characters (C0, DEL, C1), Unicode format and bidi characters that can
//     reorder a terminal line (U+202E, U+2066, zero-width joiners), line and
//     paragraph separators, other spaces (U+00A0), unassigned code points;
//   - no backslash: it is reserved for the escaped display form (below), so
//     that no valid name can look like the escaped name of another member;
//   - no leading or trailing space.
//
// Tags:
//   - at most 64 tags ([MaxTags]);
//   - keys 1 to 64 bytes of [A-Za-z0-9_.-] (tags.ValidKey, the rule of
//     config.ParseTag and of every local tag change);
//   - values valid UTF-8 without control characters (C0, DEL, C1), at most
//     512 bytes ([MaxTagValueLen]);
//   - shoal's reserved tags keep their own parsers: cluster must be 1 to 64
//     bytes of [A-Za-z0-9._-] (tags.ValidCluster), as it becomes part of file
//     names; sh (health) is decoded by Admit (tags.Decode's rules), once, and
//     the decoded health (Member.Health) is what the pool and the API read;
//     the pool puts a member whose tag does not decode out as
//     bad-health-tag; role and maint follow the generic value rule.
//
// # Members that break a rule
//
// Such a member is kept, so that an operator sees it and can remove it
// (shoal force-leave --prune), but it is marked: its Problem has the pool
// reason bad-name (checked first) or bad-tags and a detail that is itself
// safe text. Its name, and its tag keys and values, are replaced by their
// escaped display forms ([Escape]); at most MaxTags tags are kept, shoal's
// reserved ones first. The pool never makes it a writer or a reader and
// lists a db member out with its reason (its cluster may then be an escaped
// name, which the file sink never turns into a file name); metrics use the
// escaped names as label values; GET /v1/members shows it with the reason.
//
// # Display form
//
// [Escape] is the one escaping function for names shoal shows: the identity
// for valid names, otherwise Go's strconv quoting without the quotes (an
// invalid byte 0xff becomes \xff, ESC becomes \x1b, U+202E becomes \u202e, a
// backslash \\). A form longer than [MaxEscapedLen] bytes is cut and ends in
// `\...#` and 16 hex digits of a hash of the raw name. Escape is injective
// (up to that hash), so the agent's force-leave accepts the display form to
// name a member whose raw name cannot travel as a JSON string.
package member
