"""The metrics and declarations the validator, the importers, the exporters and the pages
share with the reference implementation: numpy and the standard library only, never torch.

* :mod:`.circuit`, :mod:`.causal_variable`, :mod:`.causal_bench`, :mod:`.saliency`,
  :mod:`.shapley`: each track's metric functions; :mod:`.checks`: their argument checks;
* :mod:`.graph`: the EAP-IG graph universe and circuit sizes;
* :mod:`.causal_models`: the built-in causal-model mechanisms, as data;
* :mod:`.featurizers`: featurizers declared as data (the numpy twin of the engine's);
* :mod:`.positions`: token positions declared as data.

The model engines, recomputation and scoring build on these in
:mod:`mibspec.reference_impl`; nothing here imports it.
"""
