// Command loadimage builds loadreporter's container image without a
// container daemon, and writes it as a tarball that `docker load` and
// `podman load` accept (`make image` writes bin/loadreporter-image.tar).
//
// The image is the static binary (CGO_ENABLED=0, -trimpath, version and
// revision set with -ldflags -X) alone on an empty base, as /loadreporter,
// run as the numeric non-root user 65532:65532 with entrypoint
// ["/loadreporter", "serve"], LOADREPORTER_LISTEN=0.0.0.0:8080, port
// 8080/tcp exposed and the OCI labels (version, revision, source, licenses,
// title, description, created). The version comes from git when not given:
// the exact tag of HEAD, else a Go pseudo-version, "+dirty" when the tree
// has changes; created is the commit time (or SOURCE_DATE_EPOCH), so two
// builds of one commit are the same image.
//
// It is a build tool, not shipped. It knows how to compile the command and
// lay out an image; it must not know anything about what loadreporter
// serves beyond the port, the user and the entrypoint.
package main
