// Package tags encodes and decodes the serf tags a shoal agent publishes.
//
// Every agent publishes a small set of readable tags that operators can filter
// on (serf members -tag role=db):
//
//	role     "db" or "app"
//	cluster  cluster (shard) name; absent means "default"
//	maint    maintenance reason; present means the node is drained on purpose
//
// A database agent also publishes the result of its local MySQL probe in one
// compact, versioned tag, key "sh":
//
//	v1;h=p;ro=1;sro=0;rep=1;io=1;sql=1;lag=3;sid=2;g=1;rs=io-stopped;n=17
//
// The first field is the format version. The others are key=value pairs
// separated by ';'; [Facts] lists them, with their keys, values and names in
// the API, and is the one definition of each (Encode and Decode are loops over
// it).
//
// Numbers are plain decimal without sign or leading zeros. The decoder is
// strict because the value comes from other machines: an unknown version, a
// missing, duplicated or malformed field is an error naming the field. A
// well-formed field with an unknown key is ignored, so that a later release
// can add optional fields to v1 without breaking agents that are not yet
// upgraded; a change of meaning needs a new version.
//
// memberlist limits a node's metadata to 512 bytes and serf stores the tags
// there as a magic byte followed by a msgpack map. [Merge] builds the full tag
// map, enforces the limits below and refuses a map that would not fit.
package tags
