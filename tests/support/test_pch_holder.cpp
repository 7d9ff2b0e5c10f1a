// The target that compiles the tests' shared precompiled header
// (tests/CMakeLists.txt, COSTATE_TEST_PCH); it runs nothing.
int main() { return 0; }
