// libsluice's identity: the version it was built as, for whoever links it
// at run time (e.g. a plugin's loader, or `sluice --version`).
#include "sluice/version.h"

namespace sluice {

const char* LibraryVersion() { return SLUICE_VERSION_STRING; }

}  // namespace sluice
