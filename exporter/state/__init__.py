"""What the pipeline holds: the store of watched objects and the one result type.

Below the sources (which write into a store) and the pipeline (which reads a store and
publishes results); above the engine, whose verdicts a result carries.
"""
