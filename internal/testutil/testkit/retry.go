package testkit

import "strings"

// StartRetrying runs start and, while it fails because its address is in
// use, rebind (pick new ports) and start again, at most 3 more times.
// ports.Free cannot reserve a port: another test process may take it
// before the agent binds it.
func StartRetrying(start func() error, rebind func()) error {
	err := start()
	for try := 0; err != nil && strings.Contains(err.Error(), "address already in use") && try < 3; try++ {
		rebind()
		err = start()
	}
	return err
}
