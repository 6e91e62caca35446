package harness

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
)

// RepoRoot finds the plugin's checkout: the closest parent of the working
// directory whose go.mod declares the module github.com/clustersetdns/multicluster.
// E2E_REPO_ROOT overrides it.
func RepoRoot() (string, error) {
	if dir := os.Getenv("E2E_REPO_ROOT"); dir != "" {
		return filepath.Abs(dir)
	}
	dir, err := os.Getwd()
	for ; err == nil; dir = filepath.Dir(dir) {
		gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
		if regexp.MustCompile(`(?m)^module\s+"?github\.com/clustersetdns/multicluster"?\s*$`).Match(gomod) {
			return dir, nil
		}
		if dir == filepath.Dir(dir) {
			err = errors.New("no parent directory holds the go.mod of github.com/clustersetdns/multicluster")
		}
	}
	return "", err
}
