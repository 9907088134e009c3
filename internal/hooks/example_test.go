package hooks_test

import (
	"fmt"

	"github.com/shoaldb/shoal/internal/hooks"
)

func ExampleParseSpec() {
	s, err := hooks.ParseSpec(`member-join,user:deploy=/usr/local/bin/notify --channel=ops 'db joined'`)
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Filters)
	fmt.Printf("%q\n", s.Argv)

	_, err = hooks.ParseSpec(`member-jion=/usr/local/bin/notify`)
	fmt.Println(err)
	_, err = hooks.ParseSpec(`member-join=/usr/local/bin/notify | logger`)
	fmt.Println(err)
	// Output:
	// [member-join user:deploy]
	// ["/usr/local/bin/notify" "--channel=ops" "db joined"]
	// hook spec "member-jion=/usr/local/bin/notify": filter "member-jion": unknown event type "member-jion" (want member-join, member-leave, member-failed, member-update, member-reap, user, user:NAME, query, query:NAME, pool-change, health-change or *)
	// hook spec "member-join=/usr/local/bin/notify | logger": command "/usr/local/bin/notify | logger": unquoted '|' at offset 22: commands are run without a shell; quote it, or write sh -c '...' to use a shell
}
