// What the binary was built from. The version is a compile definition (it changes with the
// project's CMake version); the commit is generated at build time (src/runtime/GitCommit.cmake),
// so that a rebuild after a new commit reports the new one without recompiling everything.
#pragma once

namespace tp::rt {

/// The short git commit of the source tree at build time, "+dirty" when tracked files had
/// changes, or "unknown" outside a git checkout.
const char* build_git_commit();

} // namespace tp::rt
