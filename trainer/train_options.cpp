#include "trainer/train_options.h"

#include <sstream>

namespace mygpt {

std::string TrainOptions::to_text() const {
  std::ostringstream out;
  out.precision(17);
  out << "steps=" << steps << "\nbatch_size=" << batch_size << "\nseq_len=" << seq_len
      << "\ngrad_accum=" << grad_accum << "\nlr=" << lr << "\nmin_lr=" << min_lr << "\nwarmup_steps=" << warmup_steps
      << "\nweight_decay=" << weight_decay << "\ngrad_clip=" << grad_clip << "\neval_every=" << eval_every
      << "\neval_steps=" << eval_steps << "\nlog_every=" << log_every << "\ncheckpoint_every=" << checkpoint_every
      << "\nseed=" << seed << "\nbucket_mb=" << bucket_mb << "\nddp_overlap=" << ddp_overlap << "\nout_dir=" << out_dir << "\nkeep_checkpoints=" << keep_checkpoints
      << "\nbf16=" << bf16 << "\nhellaswag_every=" << hellaswag_every << "\nhellaswag_limit=" << hellaswag_limit
      << "\nsample_every=" << sample_every << "\npeak_tflops=" << peak_tflops << "\ndata_order=" << data_order << "\n";
  return out.str();
}

}  // namespace mygpt
