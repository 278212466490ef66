"""Megatron-LM's own --mock-data datasets, for test/unit/data/test_mock.c.

Runs MockGPTLowLevelDataset / MockGPTDataset through BlendedMegatronDatasetBuilder exactly as
pretrain_gpt.py's train_valid_test_datasets_provider does (GPTDatasetConfig with no blend, so
Megatron sets mock = True and split = "1,1,1"; the --split given here is ignored there), from a
Megatron-LM checkout's megatron/core/datasets, importing only what the dataset code needs (the
modules it imports for logging, tokenizers and object storage are stubbed). Prints, per split,
len(dataset), the split's document range and the SHA-256 of the seq_length+1 token ids (as
little-endian int64) of a few samples, plus the first mock sequence lengths.

    g++ -O3 -shared -std=c++17 -fPIC $(/usr/bin/python3 -m pybind11 --includes) \
        MEGATRON/megatron/core/datasets/helpers.cpp \
        -o MEGATRON/megatron/core/datasets/helpers_cpp$(/usr/bin/python3-config --extension-suffix)
    /usr/bin/python3 test/ref/megatron_mock.py MEGATRON SEQ SEED VOCAB EOD TRAIN,VALID,TEST

Needs Debian's python3-numpy, python3-torch and python3-pybind11. The values in test_mock.c
come from Megatron-LM main at d98e8a64ddf3 with numpy 1.24.2.
"""
import hashlib
import sys
import types

import numpy


def stub(name, path=None, **attrs):
    m = types.ModuleType(name)
    if path:
        m.__path__ = [path]
    m.__dict__.update(attrs)
    sys.modules[name] = m


def main():
    root, seq, seed, vocab, eod, sizes = sys.argv[1], *map(int, sys.argv[2:6]), sys.argv[6]
    sizes = [int(x) for x in sizes.split(',')]
    # megatron/ and megatron/core/ as bare packages: their __init__ imports the whole framework
    stub('megatron', f'{root}/megatron')
    stub('megatron.core', f'{root}/megatron/core')
    stub('megatron.core.utils', log_single_rank=lambda logger, *a, rank=0, **k: None)
    stub('megatron.core.tokenizers', MegatronTokenizerBase=object)
    stub('megatron.core.safe_globals', safe_numpy_load=numpy.load)

    class NoMsc:
        @staticmethod
        def is_enabled():
            return False

    stub('megatron.core.msc_utils', MultiStorageClientFeature=NoMsc, maybe_msc=None)
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDatasetConfig, MockGPTDataset

    class Tokenizer:  # what the datasets read from the tokenizer
        unique_identifiers = {'class': 'Tokenizer'}
        pad = None

        def __init__(self, vocab_size, eod):
            self.vocab_size, self.eod = vocab_size, eod

    config = GPTDatasetConfig(
        random_seed=seed, sequence_length=seq, blend=None, blend_per_split=None, split='90,8,2',
        path_to_cache=None, tokenizer=Tokenizer(vocab, eod), reset_position_ids=False,
        reset_attention_mask=False, eod_mask_loss=False, mid_level_dataset_surplus=0.005)
    splits = BlendedMegatronDatasetBuilder(MockGPTDataset, sizes, lambda: True, config).build()
    print('lengths', splits[0].dataset.sequence_lengths[:5].tolist())
    for name, ds in zip(('train', 'valid', 'test'), splits):
        print(name, len(ds), ds.indices[0], ds.indices[-1] + 1)
        for i in (0, 1, 2, 1000, len(ds) - 1):
            text = ds._query_document_sample_shuffle_indices(i)[0]
            h = hashlib.sha256(numpy.asarray(text, dtype='<i8').tobytes()).hexdigest()
            print(f'  {i} {h} {text[:4].tolist()}')


if __name__ == '__main__':
    main()
