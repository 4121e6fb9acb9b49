// Package buildinfo says which build of loadreporter is running: its
// version, the VCS revision it was built from and the Go toolchain, for
// `loadreporter --version` and for whoever wants to print it.
//
// The values come from the linker when the build sets them (the image
// build does: -ldflags "-X …/buildinfo.version=… -X …/buildinfo.revision=…
// -X …/buildinfo.modified=true"), otherwise from runtime/debug.ReadBuildInfo
// (`go install …@version` stamps the module version, a build in a checkout
// stamps vcs.revision and vcs.modified unless -buildvcs=false).
//
// It must not know anything about serving, flags or the rest of the
// composition: it is a leaf any package may import.
package buildinfo
