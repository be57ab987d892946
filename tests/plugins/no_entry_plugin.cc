// An ordinary shared library: it exports a function but no titan plugin descriptor.
extern "C" __attribute__((visibility("default"))) int titan_test_not_a_plugin() { return 42; }
