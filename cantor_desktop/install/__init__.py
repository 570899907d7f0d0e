"""Engine builds: the manifest and its signature, hardware evidence, backends, the installed builds and their trial load."""
