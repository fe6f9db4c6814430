// Stand-in for builds without Gloo's headers.
#include <stdexcept>

#include "distributed/gloo_communicator.h"

namespace mygpt {

std::unique_ptr<Communicator> make_gloo_communicator(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                                     std::chrono::milliseconds) {
  throw std::invalid_argument(
      "this build has no Gloo backend, which a job started without MPI needs (install libgloo-dev and rebuild: "
      "scripts/setup.sh), or start the job with mpirun");
}

}  // namespace mygpt
