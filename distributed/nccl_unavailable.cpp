// Chosen by CMake when the build has no NCCL (no CUDA LibTorch or no nccl.h).
#include <stdexcept>

#include "distributed/nccl_communicator.h"

namespace mygpt {

std::unique_ptr<Communicator> make_nccl_communicator(Communicator&, int, double,
                                                     std::function<void(const std::string&)>) {
  throw std::invalid_argument(
      "this build of mygpt-ddp has no NCCL backend, so several CUDA ranks cannot train together");
}

}  // namespace mygpt
