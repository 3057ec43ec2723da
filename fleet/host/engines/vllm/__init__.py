"""vLLM behind the engine seam (`fleet.host.engines.base.Engine`): see `engine`."""
