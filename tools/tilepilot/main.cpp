// tilepilot: the command-line interface (see DESIGN.md, "The CLI").
#include <iostream>

int main(int argc, char** argv) {
  std::cout << "tilepilot\n";
  return 0;
}
