"""What the caller hands jitflow.compile, as jitflow takes it: the module, copied with its functions
exported under their names (ir_module.py), the PassContext, captured, keyed and entered
(pass_context.py), and where the caller compiled it (origin.py)."""
