// mlaverify-plugin-worker: the process a guarded run's calls are made in (plugin/guarded.h).
// Started by GuardedPluginBackend with fork + exec; not meant to be run by hand.
#include "plugin/guarded.h"

int main(int argc, char** argv) { return mlaverify::plugin::run_plugin_worker(argc, argv); }
