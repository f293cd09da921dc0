#include "sluice/core/environment_number.h"

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace sluice {
namespace {

void SayIgnoredOnce(const char* name, const char* text, const std::string& fallback, const std::string& least) {
  ABSL_CONST_INIT static absl::Mutex mu(absl::kConstInit);
  static auto* const said = new std::set<std::string>;  // never destroyed: a thread may warn at exit
  absl::MutexLock lock(&mu);
  if (!said->insert(name).second) return;
  std::fprintf(stderr, "sluice: %s=\"%s\" ignored: not a number >= %s; using %s\n", name, text, least.c_str(),
               fallback.c_str());
}

}  // namespace

int64_t IntFromEnvironment(const char* name, int64_t fallback, int64_t least) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  int64_t value = 0;
  if (absl::SimpleAtoi(text, &value) && value >= least) return value;
  SayIgnoredOnce(name, text, absl::StrCat(fallback), absl::StrCat(least));
  return fallback;
}

double DoubleFromEnvironment(const char* name, double fallback, double least) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  double value = 0;
  if (absl::SimpleAtod(text, &value) && value >= least) return value;
  SayIgnoredOnce(name, text, absl::StrCat(fallback), absl::StrCat(least));
  return fallback;
}

}  // namespace sluice
