// The emulator's names: each fast/cuda entry point fcuda_<op> (phax/fcuda.h, phax/fcuda_decode.h,
// and fast/cuda/blas.cuh's library-internal product) mapped to fcuda_emu_<op>, the name the
// same code carries in phax_cuda_emu, so the two libraries link side by side. Each inclusion
// toggles the mapping: the first maps, the next unmaps. phax/fcuda_emu.h uses it to declare the
// emulator's entry points; fast/cuda's sources compiled for the emulator keep it on
// (cuda_common.cuh), so their definitions take the emulator's names. The list is checked
// against the headers and the built libraries by the structure suite (tests/structure.sh
// emu-names): an entry point missing here would leave the emulated library defining the
// device's name.
#ifndef PHAX_FCUDA_EMU_NAMES_ON
#define PHAX_FCUDA_EMU_NAMES_ON
#define fcuda_f32_ops                   fcuda_emu_f32_ops
#define fcuda_ops_error                 fcuda_emu_ops_error
#define fcuda_malloc                    fcuda_emu_malloc
#define fcuda_free                      fcuda_emu_free
#define fcuda_upload                    fcuda_emu_upload
#define fcuda_download                  fcuda_emu_download
#define fcuda_sync                      fcuda_emu_sync
#define fcuda_copy                      fcuda_emu_copy
#define fcuda_mem_stats                 fcuda_emu_mem_stats
#define fcuda_mem_reset_peak            fcuda_emu_mem_reset_peak
#define fcuda_embedding_fwd             fcuda_emu_embedding_fwd
#define fcuda_embedding_bwd             fcuda_emu_embedding_bwd
#define fcuda_rmsnorm_fwd               fcuda_emu_rmsnorm_fwd
#define fcuda_rmsnorm_bwd_ws            fcuda_emu_rmsnorm_bwd_ws
#define fcuda_rmsnorm_bwd               fcuda_emu_rmsnorm_bwd
#define fcuda_layernorm_fwd             fcuda_emu_layernorm_fwd
#define fcuda_layernorm_bwd_ws          fcuda_emu_layernorm_bwd_ws
#define fcuda_layernorm_bwd             fcuda_emu_layernorm_bwd
#define fcuda_headnorm_fwd              fcuda_emu_headnorm_fwd
#define fcuda_headnorm_bwd_ws           fcuda_emu_headnorm_bwd_ws
#define fcuda_headnorm_bwd              fcuda_emu_headnorm_bwd
#define fcuda_gelu_fwd                  fcuda_emu_gelu_fwd
#define fcuda_gelu_bwd                  fcuda_emu_gelu_bwd
#define fcuda_silu_fwd                  fcuda_emu_silu_fwd
#define fcuda_silu_bwd                  fcuda_emu_silu_bwd
#define fcuda_linear_fwd                fcuda_emu_linear_fwd
#define fcuda_linear_bwd                fcuda_emu_linear_bwd
#define fcuda_gemm_tf32                 fcuda_emu_gemm_tf32
#define fcuda_sgemm                     fcuda_emu_sgemm
#define fcuda_rope_table_len            fcuda_emu_rope_table_len
#define fcuda_rope_table                fcuda_emu_rope_table
#define fcuda_rope_fwd                  fcuda_emu_rope_fwd
#define fcuda_rope_bwd                  fcuda_emu_rope_bwd
#define fcuda_mix_fwd                   fcuda_emu_mix_fwd
#define fcuda_mix_bwd_ws                fcuda_emu_mix_bwd_ws
#define fcuda_mix_bwd                   fcuda_emu_mix_bwd
#define fcuda_swiglu_fwd_ws             fcuda_emu_swiglu_fwd_ws
#define fcuda_swiglu_fwd                fcuda_emu_swiglu_fwd
#define fcuda_swiglu_bwd_ws             fcuda_emu_swiglu_bwd_ws
#define fcuda_swiglu_bwd                fcuda_emu_swiglu_bwd
#define fcuda_swiglu_keep_len           fcuda_emu_swiglu_keep_len
#define fcuda_swiglu_fwd_keep_ws        fcuda_emu_swiglu_fwd_keep_ws
#define fcuda_swiglu_fwd_keep           fcuda_emu_swiglu_fwd_keep
#define fcuda_swiglu_bwd_kept_ws        fcuda_emu_swiglu_bwd_kept_ws
#define fcuda_swiglu_bwd_kept           fcuda_emu_swiglu_bwd_kept
#define fcuda_cross_entropy_ws          fcuda_emu_cross_entropy_ws
#define fcuda_cross_entropy_fwd         fcuda_emu_cross_entropy_fwd
#define fcuda_cross_entropy_bwd         fcuda_emu_cross_entropy_bwd
#define fcuda_cross_entropy_fwd_bwd     fcuda_emu_cross_entropy_fwd_bwd
#define fcuda_lce_tile_rows             fcuda_emu_lce_tile_rows
#define fcuda_linear_cross_entropy_ws   fcuda_emu_linear_cross_entropy_ws
#define fcuda_linear_cross_entropy_rows fcuda_emu_linear_cross_entropy_rows
#define fcuda_linear_cross_entropy      fcuda_emu_linear_cross_entropy
#define fcuda_dss_kernel_fwd_ws         fcuda_emu_dss_kernel_fwd_ws
#define fcuda_dss_kernel_fwd            fcuda_emu_dss_kernel_fwd
#define fcuda_dss_kernel_bwd_ws         fcuda_emu_dss_kernel_bwd_ws
#define fcuda_dss_kernel_bwd            fcuda_emu_dss_kernel_bwd
#define fcuda_attention_fwd_ws          fcuda_emu_attention_fwd_ws
#define fcuda_attention_bwd_ws          fcuda_emu_attention_bwd_ws
#define fcuda_attention_fwd             fcuda_emu_attention_fwd
#define fcuda_attention_bwd             fcuda_emu_attention_bwd
#define fcuda_mlstm_fwd_ws              fcuda_emu_mlstm_fwd_ws
#define fcuda_mlstm_fwd                 fcuda_emu_mlstm_fwd
#define fcuda_mlstm_bwd_ws              fcuda_emu_mlstm_bwd_ws
#define fcuda_mlstm_bwd                 fcuda_emu_mlstm_bwd
#define fcuda_gdn_fwd_ws                fcuda_emu_gdn_fwd_ws
#define fcuda_gdn_fwd                   fcuda_emu_gdn_fwd
#define fcuda_gdn_bwd_ws                fcuda_emu_gdn_bwd_ws
#define fcuda_gdn_bwd                   fcuda_emu_gdn_bwd
#define fcuda_gdn_conv_fwd              fcuda_emu_gdn_conv_fwd
#define fcuda_gdn_conv_bwd              fcuda_emu_gdn_conv_bwd
#define fcuda_gdn_conv_bwd_ws           fcuda_emu_gdn_conv_bwd_ws
#define fcuda_gdn_gates_fwd             fcuda_emu_gdn_gates_fwd
#define fcuda_gdn_gates_bwd             fcuda_emu_gdn_gates_bwd
#define fcuda_ssm_plan_new              fcuda_emu_ssm_plan_new
#define fcuda_ssm_plan_free             fcuda_emu_ssm_plan_free
#define fcuda_ssm_plan_method           fcuda_emu_ssm_plan_method
#define fcuda_ssm_plan_fft_len          fcuda_emu_ssm_plan_fft_len
#define fcuda_ssm_conv_fwd_ws           fcuda_emu_ssm_conv_fwd_ws
#define fcuda_ssm_conv_bwd_ws           fcuda_emu_ssm_conv_bwd_ws
#define fcuda_ssm_conv_fwd              fcuda_emu_ssm_conv_fwd
#define fcuda_ssm_conv_bwd              fcuda_emu_ssm_conv_bwd
#define fcuda_adamw_ws                  fcuda_emu_adamw_ws
#define fcuda_adamw_step                fcuda_emu_adamw_step
#define fcuda_decoder_new               fcuda_emu_decoder_new
#define fcuda_decoder_free              fcuda_emu_decoder_free
#define fcuda_decoder_reset             fcuda_emu_decoder_reset
#define fcuda_decoder_pos               fcuda_emu_decoder_pos
#define fcuda_decoder_state_bytes       fcuda_emu_decoder_state_bytes
#define fcuda_decoder_step              fcuda_emu_decoder_step
#define fcuda_decoder_prefill           fcuda_emu_decoder_prefill
#define fcuda_decoder_prefill_all       fcuda_emu_decoder_prefill_all
#define fcuda_blas_gemm                 fcuda_emu_blas_gemm
#else
#undef PHAX_FCUDA_EMU_NAMES_ON
#undef fcuda_f32_ops
#undef fcuda_ops_error
#undef fcuda_malloc
#undef fcuda_free
#undef fcuda_upload
#undef fcuda_download
#undef fcuda_sync
#undef fcuda_copy
#undef fcuda_mem_stats
#undef fcuda_mem_reset_peak
#undef fcuda_embedding_fwd
#undef fcuda_embedding_bwd
#undef fcuda_rmsnorm_fwd
#undef fcuda_rmsnorm_bwd_ws
#undef fcuda_rmsnorm_bwd
#undef fcuda_layernorm_fwd
#undef fcuda_layernorm_bwd_ws
#undef fcuda_layernorm_bwd
#undef fcuda_headnorm_fwd
#undef fcuda_headnorm_bwd_ws
#undef fcuda_headnorm_bwd
#undef fcuda_gelu_fwd
#undef fcuda_gelu_bwd
#undef fcuda_silu_fwd
#undef fcuda_silu_bwd
#undef fcuda_linear_fwd
#undef fcuda_linear_bwd
#undef fcuda_gemm_tf32
#undef fcuda_sgemm
#undef fcuda_rope_table_len
#undef fcuda_rope_table
#undef fcuda_rope_fwd
#undef fcuda_rope_bwd
#undef fcuda_mix_fwd
#undef fcuda_mix_bwd_ws
#undef fcuda_mix_bwd
#undef fcuda_swiglu_fwd_ws
#undef fcuda_swiglu_fwd
#undef fcuda_swiglu_bwd_ws
#undef fcuda_swiglu_bwd
#undef fcuda_swiglu_keep_len
#undef fcuda_swiglu_fwd_keep_ws
#undef fcuda_swiglu_fwd_keep
#undef fcuda_swiglu_bwd_kept_ws
#undef fcuda_swiglu_bwd_kept
#undef fcuda_cross_entropy_ws
#undef fcuda_cross_entropy_fwd
#undef fcuda_cross_entropy_bwd
#undef fcuda_cross_entropy_fwd_bwd
#undef fcuda_lce_tile_rows
#undef fcuda_linear_cross_entropy_ws
#undef fcuda_linear_cross_entropy_rows
#undef fcuda_linear_cross_entropy
#undef fcuda_dss_kernel_fwd_ws
#undef fcuda_dss_kernel_fwd
#undef fcuda_dss_kernel_bwd_ws
#undef fcuda_dss_kernel_bwd
#undef fcuda_attention_fwd_ws
#undef fcuda_attention_bwd_ws
#undef fcuda_attention_fwd
#undef fcuda_attention_bwd
#undef fcuda_mlstm_fwd_ws
#undef fcuda_mlstm_fwd
#undef fcuda_mlstm_bwd_ws
#undef fcuda_mlstm_bwd
#undef fcuda_gdn_fwd_ws
#undef fcuda_gdn_fwd
#undef fcuda_gdn_bwd_ws
#undef fcuda_gdn_bwd
#undef fcuda_gdn_conv_fwd
#undef fcuda_gdn_conv_bwd
#undef fcuda_gdn_conv_bwd_ws
#undef fcuda_gdn_gates_fwd
#undef fcuda_gdn_gates_bwd
#undef fcuda_ssm_plan_new
#undef fcuda_ssm_plan_free
#undef fcuda_ssm_plan_method
#undef fcuda_ssm_plan_fft_len
#undef fcuda_ssm_conv_fwd_ws
#undef fcuda_ssm_conv_bwd_ws
#undef fcuda_ssm_conv_fwd
#undef fcuda_ssm_conv_bwd
#undef fcuda_adamw_ws
#undef fcuda_adamw_step
#undef fcuda_decoder_new
#undef fcuda_decoder_free
#undef fcuda_decoder_reset
#undef fcuda_decoder_pos
#undef fcuda_decoder_state_bytes
#undef fcuda_decoder_step
#undef fcuda_decoder_prefill
#undef fcuda_decoder_prefill_all
#undef fcuda_blas_gemm
#endif
