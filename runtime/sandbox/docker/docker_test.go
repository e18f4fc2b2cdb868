package docker_test

import (
	"testing"

	"lathe/runtime/sandbox"
	"lathe/runtime/sandbox/docker"
	"lathe/runtime/sandbox/docker/dockertest"
	"lathe/runtime/sandbox/sandboxtest"
)

func TestSuite(t *testing.T) {
	sandboxtest.Run(t, func(t *testing.T) sandbox.Driver {
		return dockertest.Docker(t, docker.Options{Owner: "lathe-test-docker"})
	})
}
