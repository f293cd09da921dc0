// A shared object with no plugin entry points.
extern "C" int sluice_test_add(int a, int b) { return a + b; }
