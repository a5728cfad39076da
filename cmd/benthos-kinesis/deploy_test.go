package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// deployDir holds the Dockerfile and the Kubernetes manifests.
const deployDir = "../../config/deploy"

// TestDeployPipelinesLint: the pipeline in each Kubernetes manifest's
// ConfigMap passes the binary's lint (the manifests' Kubernetes types are
// checked in their own module, config/deploy).
func TestDeployPipelinesLint(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(deployDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifest in %s: %v", deployDir, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		found := 0
		for {
			var doc struct {
				Kind string
				Data map[string]string
			}
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			pipeline, ok := doc.Data["pipeline.yaml"]
			if doc.Kind != "ConfigMap" || !ok {
				continue
			}
			found++
			path := filepath.Join(t.TempDir(), "pipeline.yaml")
			if err := os.WriteFile(path, []byte(pipeline), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "lint", path)
			cmd.Env = append(os.Environ(), "POD_NAME=orders-archiver-0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("%s: the ConfigMap's pipeline.yaml fails lint: %v\n%s", f, err, out)
			}
		}
		if found != 1 {
			t.Errorf("%s: %d ConfigMaps with a pipeline.yaml, want 1", f, found)
		}
	}
}

// TestDockerImageBuilds builds the image of config/deploy/Dockerfile and
// runs its binary, where a Docker daemon answers; elsewhere it says why it
// is skipped.
func TestDockerImageBuilds(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("skipped: no docker command on this machine")
	}
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Skipf("skipped: no Docker daemon answers (%v): %s", err, strings.TrimSpace(string(out)))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	tag := "benthos-kinesis-test:" + time.Now().Format("20060102150405")
	build := exec.CommandContext(ctx, "docker", "build", "-f", filepath.Join(deployDir, "Dockerfile"), "-t", tag, "../..")
	build.Env = append(os.Environ(), "DOCKER_BUILDKIT=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", tag).Run() })
	out, err := exec.CommandContext(ctx, "docker", "run", "--rm", tag, "list", "inputs").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "aws_kinesis_streams") {
		t.Fatalf("the image's binary does not list the input: %v\n%s", err, out)
	}
	user, err := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Config.User}}", tag).Output()
	if err != nil || strings.TrimSpace(string(user)) != "65532:65532" {
		t.Fatalf("the image runs as %q (%v), want the non-root 65532:65532", user, err)
	}
}
