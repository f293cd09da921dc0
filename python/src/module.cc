// The _sluice extension module: a thin layer over the C++ engine. The public
// API, docstrings and validation live in python/sluice/*.py.
#include "bindings.h"
#include "interrupt.h"
#include "sluice/version.h"

PYBIND11_MODULE(_sluice, m) {
  m.doc() = "sluice's C++ engine (use the `sluice` package)";
  m.attr("__version__") = sluice::LibraryVersion();
  sluice::python::InitErrors(m);
  sluice::python::InitPipeline(m);
  sluice::python::InitProfile(m);
  sluice::python::InitService(m);
  sluice::python::InitTensor(m);
  sluice::python::InitInterrupts();
}
