#include <iostream>

#include "experiments/cli/cli.h"

int main(int argc, char** argv) { return servesim::experiments::run_cli(argc, argv, std::cout, std::cerr); }
