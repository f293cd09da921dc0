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

template <typename T, typename Parse>
T NumberFromEnvironment(const char* name, T fallback, T least, Parse parse) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  T value = 0;
  if (parse(text, &value) && value >= least) return value;
  SayIgnoredOnce(name, text, absl::StrCat(fallback), absl::StrCat(least));
  return fallback;
}

}  // namespace

int64_t IntFromEnvironment(const char* name, int64_t fallback, int64_t least) {
  return NumberFromEnvironment(name, fallback, least,
                               [](const char* text, int64_t* v) { return absl::SimpleAtoi(text, v); });
}

double DoubleFromEnvironment(const char* name, double fallback, double least) {
  return NumberFromEnvironment(name, fallback, least,
                               [](const char* text, double* v) { return absl::SimpleAtod(text, v); });
}

}  // namespace sluice
