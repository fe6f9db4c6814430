#pragma once
// The subcommands. Each returns the process exit code; bad input throws std::invalid_argument.
#include "launcher/cli.h"
#include "distributed/mpi_world.h"

namespace mygpt {

int run_train(const po::variables_map& values, const MpiSession& mpi);
int run_generate(const po::variables_map& values);
int run_eval(const po::variables_map& values);
int run_prepare(const po::variables_map& values);
int run_plan(const po::variables_map& values);

}  // namespace mygpt
