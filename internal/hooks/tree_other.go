//go:build !linux

package hooks

import (
	"log/slog"
	"os/exec"

	"golang.org/x/sys/unix"
)

// RunEnv marks every process a hook run starts (see tree_linux.go).
const RunEnv = "SHOAL_HOOK_RUN"

// hookTree without Linux's subreaper, pidfds and /proc: a timeout kills
// the hook's process group only.
type hookTree struct{}

type hookRun struct{ pid int }

func processTree(*slog.Logger) *hookTree { return &hookTree{} }

func (t *hookTree) start(p execParams, pipes *pipes) (*exec.Cmd, hookRun, error) {
	cmd, err := start(p, pipes)
	if err != nil {
		return nil, hookRun{}, err
	}
	return cmd, hookRun{pid: cmd.Process.Pid}, nil
}

func (t *hookTree) exited(hookRun)                                  {}
func (t *hookTree) signal(hookRun, unix.Signal, map[int]uint64) int { return 0 }
func (t *hookTree) kill(hookRun)                                    {}
