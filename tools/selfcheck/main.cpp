// fa4rt-selfcheck: the child process of a kernel's first-use self-check (runtime/self_check.hpp). Shipped
// beside libfa4rt: a kernel that traps or hangs here cannot take the engine's CUDA contexts down.
#include <string>
#include <vector>

#include "runtime/self_check.hpp"

int main(int argc, char** argv) { return fa4::detail::run_self_check_child(std::vector<std::string>(argv + 1, argv + argc)); }
