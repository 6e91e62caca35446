package harness

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// RootModule is the module path of the plugin, whose checkout holds this module.
const RootModule = "github.com/clustersetdns/multicluster"

// RepoRoot finds the plugin's checkout: the closest parent of the working
// directory whose go.mod declares RootModule. E2E_REPO_ROOT overrides it.
func RepoRoot() (string, error) {
	if dir := os.Getenv("E2E_REPO_ROOT"); dir != "" {
		return filepath.Abs(dir)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if modulePath(filepath.Join(dir, "go.mod")) == RootModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no parent directory holds the go.mod of %s", RootModule)
		}
		dir = parent
	}
}

func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
