use crate::candle::cpu;
use crate::candle::layers::kernels::gpu::{
    attention_block, chunked_attention, dense_mask, gated_ops, gated_parts, qkv_parts, GpuKernels,
};
use crate::candle::layers::kernels::CpuKernels;
use crate::candle::layers::kernels::Kernels;
use crate::candle::layers::Weights;
use crate::candle::layers::*;
use crate::candle::runtime::kv_cache::StepLayout;
use candle_nn::{Linear, Module};

fn max_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
    (a - b)?.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()
}

#[test]
fn the_fused_split_and_rotation_matches_candles_copies_and_rope() -> Result<()> {
    let dev = Device::Cpu;
    let (hidden, heads, kv, d) = (24, 4, 2, 8);
    for bias in [true, false] {
        let mut weights = std::collections::HashMap::new();
        for (name, out) in [
            ("q_proj", heads * d),
            ("k_proj", kv * d),
            ("v_proj", kv * d),
        ] {
            let w = Tensor::randn(0f32, 1.0, (out, hidden), &dev)?;
            weights.insert(format!("{name}.weight"), w);
            let b = Tensor::randn(0f32, 1.0, out, &dev)?;
            weights.insert(format!("{name}.bias"), b);
        }
        let vb = candle_nn::VarBuilder::from_tensors(weights, DType::F32, &dev);
        let names = QkvNames::Separate(["q_proj", "k_proj", "v_proj"]);
        let qkv = QkvProjection::load(&vb, &names, hidden, (heads, kv, d), bias, &Weights::F32)?;
        // Large enough for the parallel path, and a single decode step.
        for (past, new, pad) in [(3, 700, vec![0, 4]), (40, 1, vec![0, 4])] {
            let layout = StepLayout { past, new, pad };
            let rope = Rope::new(d, 10_000.0, |f| f, &dev)?;
            let (cos, sin) = rope.tables(&layout, DType::F32)?;
            let x = Tensor::randn(0f32, 1.0, (2, new, hidden), &dev)?;
            let (q, k, v) = qkv.forward_rotated(&x, &cos, &sin)?;
            let (q0, k0, v0) = qkv.forward(&x)?;
            let want = [
                apply_rope(&q0, &cos, &sin)?,
                apply_rope(&k0, &cos, &sin)?,
                v0,
            ];
            for (got, want) in [q, k, v].iter().zip(&want) {
                assert_eq!(got.dims(), want.dims());
                let diff = max_diff(got, want)?;
                assert!(diff < 1e-5, "bias {bias} new {new}: {diff}");
            }
        }
    }
    Ok(())
}

#[test]
fn a_decode_steps_q_k_v_from_weight_views_are_the_stacked_products_parts_uncopied() -> Result<()> {
    let dev = Device::Cpu;
    let (hidden, heads, kv, d, rows) = (24, 4, 2, 8, 5);
    let weight = Tensor::randn(0f32, 1.0, ((heads + 2 * kv) * d, hidden), &dev)?;
    let weight_of = |vb: &candle_nn::VarBuilder, name: &str| {
        vb.pp(name).get(((heads + 2 * kv) * d, hidden), "weight")
    };
    let vb = candle_nn::VarBuilder::from_tensors(
        [("qkv.weight".to_string(), weight)].into(),
        DType::F32,
        &dev,
    );
    let qkv = QkvProjection::load(
        &vb,
        &QkvNames::Fused("qkv"),
        hidden,
        (heads, kv, d),
        false,
        &Weights::F32,
    )?;
    let x = Tensor::randn(0f32, 1.0, (rows, 1, hidden), &dev)?;
    // On the CPU `forward` splits the stacked (packed) product.
    let (q0, k0, v0) = qkv.forward(&x)?;
    let dense = Linear::new(weight_of(&vb, "qkv")?, None);
    let (q, k, v) = qkv_parts(&dense, &x, qkv.dims)?;
    for (name, got, want, h) in [
        ("q", &q, &q0, heads),
        ("k", &k, &k0, kv),
        ("v", &v, &v0, kv),
    ] {
        assert_eq!(got.dims(), &[rows, h, 1, d], "{name}");
        let diff = max_diff(got, want)?;
        assert!(diff < 1e-5, "{name}: {diff}");
        // Contiguous as produced: the rope and cache writes need no copy of it.
        assert!(got.is_contiguous(), "{name} needs a copy");
    }
    // And candle's rope reads the parts' layout (strides of a one-token transpose)
    // as it reads a copy's.
    let layout = StepLayout {
        past: 40,
        new: 1,
        pad: vec![0; rows],
    };
    let (cos, sin) = Rope::new(d, 10_000.0, |f| f, &dev)?.tables(&layout, DType::F32)?;
    for (got, want) in [(&q, &q0), (&k, &k0)] {
        let diff = max_diff(
            &apply_rope(got, &cos, &sin)?,
            &apply_rope(want, &cos, &sin)?,
        )?;
        assert!(diff < 1e-5, "rotated: {diff}");
    }
    // Where the stacked product's parts do need one.
    let stacked = qkv
        .qkv
        .forward(&x)?
        .reshape((rows, 1, heads + 2 * kv, d))?
        .transpose(1, 2)?;
    assert!(!stacked.narrow(1, heads, kv)?.is_contiguous());
    Ok(())
}

#[test]
fn the_gated_mlp_from_weight_views_is_the_stacked_products() -> Result<()> {
    let dev = Device::Cpu;
    let (hidden, inner) = (24, 19);
    for act in [GatedAct::Silu, GatedAct::GeluTanh] {
        let gate_up = Linear::new(Tensor::randn(0f32, 1.0, (2 * inner, hidden), &dev)?, None);
        for new in [1, 6] {
            let x = Tensor::randn(0f32, 1.0, (3, new, hidden), &dev)?;
            let stacked = gated_ops(&gate_up.forward(&x)?, inner, act)?;
            let parts = gated_parts(&gate_up, &x, inner, act)?;
            assert_eq!(parts.dims(), &[3, new, inner]);
            // Products of up to a few hundred: compared relative to the largest.
            let scale = stacked.abs()?.flatten_all()?.max(0)?.to_scalar::<f32>()?;
            let diff = max_diff(&parts, &stacked)? / scale;
            assert!(diff < 1e-6, "{act:?} new {new}: {diff}");
        }
    }
    Ok(())
}

#[test]
fn the_cpu_sets_vectorised_rms_norm_matches_the_gpu_sets_candle_op() -> Result<()> {
    let x = Tensor::randn(0f32, 2.0, (3, 700, 48), &Device::Cpu)?;
    let w = Tensor::randn(1f32, 0.3, 48, &Device::Cpu)?;
    let diff = max_diff(
        &CpuKernels.rms_norm(&x, &w, 1e-6)?,
        &GpuKernels.rms_norm(&x, &w, 1e-6)?,
    )?;
    assert!(diff < 1e-5, "{diff}");
    Ok(())
}

#[test]
fn the_fused_gated_activation_matches_candles_ops() -> Result<()> {
    let x = Tensor::randn(0f32, 3.0, (2, 5, 2 * 19), &Device::Cpu)?;
    for act in [GatedAct::Silu, GatedAct::GeluTanh] {
        let fused = cpu::gated(&x, 19, act)?;
        let ops = gated_ops(&x, 19, act)?;
        assert_eq!(fused.dims(), &[2, 5, 19]);
        let diff = max_diff(&fused, &ops)?;
        assert!(diff < 1e-5, "{act:?}: {diff}");
    }
    Ok(())
}

#[test]
fn the_device_built_mask_is_the_host_mask_bit_for_bit() -> Result<()> {
    // Decode and prefill steps, left padding longer than a step, a padding query in
    // the step, and sliding windows narrower and wider than the span.
    let cases = [
        (7, 1, vec![0, 3, 7], None),
        (7, 1, vec![0, 3, 7], Some(4)),
        (0, 9, vec![0, 3, 8], None),
        (0, 9, vec![0, 3, 8], Some(2)),
        (5, 4, vec![6, 1], Some(20)),
    ];
    for (past, new, pad, window) in cases {
        let layout = StepLayout { past, new, pad };
        let got: Vec<f32> = dense_mask(&layout, window, &Device::Cpu)?
            .flatten_all()?
            .to_vec1()?;
        let want = layout.mask(window);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "{layout:?} window {window:?}");
    }
    Ok(())
}

#[test]
fn query_chunks_give_the_same_attention_as_one_block() -> Result<()> {
    let dev = Device::Cpu;
    let (rows, heads, kv, new, d) = (2, 4, 2, 9, 8);
    let q = Tensor::randn(0f32, 1.0, (rows, heads, new, d), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (rows, kv, new, d), &dev)?;
    let v = Tensor::randn(0f32, 1.0, (rows, kv, new, d), &dev)?;
    let layout = StepLayout {
        past: 0,
        new,
        pad: vec![0, 3],
    };
    let mask = dense_mask(&layout, None, &dev)?;
    let whole = attention_block(&q, &k, &v, &mask, 0.3)?;
    // A budget of two query rows per chunk: five chunks, the last one short.
    let chunked = chunked_attention(&q, &k, &v, &mask, 0.3, 2 * rows * heads * new)?;
    assert_eq!(chunked.dims(), whole.dims());
    let diff = max_diff(&chunked, &whole)?;
    assert!(diff < 1e-6, "{diff}");
    Ok(())
}

/// On the CPU the table's rows are read from the checkpoint as stored, whatever the
/// weights' format: a lookup gives the checkpoint's rows widened exactly, an id past
/// the table is an error, and a tied head made from the file computes what a head
/// made from the table in memory computes.
#[test]
fn embedding_rows_are_read_from_the_checkpoint_exactly_in_every_format() -> Result<()> {
    use crate::candle::checkpoint::Checkpoint;
    use crate::candle::weights::WeightFormat;
    let dev = Device::Cpu;
    let (vocab, hidden) = (50, 64);
    let table = Tensor::randn(0f32, 1.0, (vocab, hidden), &dev)?.to_dtype(DType::BF16)?;
    let path =
        std::env::temp_dir().join(format!("embedding-rows-{}.safetensors", std::process::id()));
    let mut map = std::collections::HashMap::new();
    map.insert("model.embed_tokens.weight".to_string(), table.clone());
    candle_core::safetensors::save(&map, &path)?;
    let checkpoint =
        Checkpoint::open(std::slice::from_ref(&path)).map_err(candle_core::Error::wrap)?;
    let _ = std::fs::remove_file(&path); // the open file stays readable
    let vb =
        candle_nn::VarBuilder::from_backend(Box::new(checkpoint.clone()), DType::F32, dev.clone());
    let m = vb.pp("model");
    let ids = Tensor::new(&[[3u32, 49, 0], [7, 7, 21]], &dev)?;
    let exact = table
        .to_dtype(DType::F32)?
        .index_select(&ids.flatten_all()?, 0)?
        .reshape((2, 3, hidden))?;
    for format in [
        WeightFormat::F32,
        WeightFormat::Bf16,
        WeightFormat::Q8_0,
        WeightFormat::Q4K,
    ] {
        let weights = Weights {
            format,
            stored: DType::BF16,
            checkpoint: Some(checkpoint.clone()),
            gguf: None,
            kernels: &CpuKernels,
        };
        let embed = Embedding::load(&m, "embed_tokens", (vocab, hidden), &weights)?;
        assert_eq!(max_diff(&embed.forward(&ids)?, &exact)?, 0.0, "{format}");
        let outside = embed.forward(&Tensor::new(&[1u32, 50], &dev)?).unwrap_err();
        assert!(outside.to_string().contains("token id 50"), "{outside}");
        // The head from the file, and one from the same table held in memory.
        let held = Weights {
            checkpoint: None,
            ..weights.clone()
        };
        let x = Tensor::randn(0f32, 1.0, (3, 1, hidden), &dev)?;
        let from_file = embed.tied_head(&m, "embed_tokens", &weights)?.forward(&x)?;
        let in_memory = Embedding::load(&m, "embed_tokens", (vocab, hidden), &held)?
            .tied_head(&m, "embed_tokens", &held)?
            .forward(&x)?;
        assert_eq!(max_diff(&from_file, &in_memory)?, 0.0, "{format}");
    }
    Ok(())
}
