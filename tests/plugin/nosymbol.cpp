// libmlav_test_nosymbol.so: a shared library that is not a plugin (no mlav_plugin_open), for the
// "one clear line" test of load_plugin.
extern "C" __attribute__((visibility("default"))) int mlav_not_a_plugin() { return 1; }
