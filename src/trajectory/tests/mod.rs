//! Tests of the trajectory readers: the Python-literal parser, each format on
//! samples copied from the real files, loading, and (with `TOOLBENCH_DIR`) the
//! real dataset.

mod converted_sft;
mod formats;
mod loading;
mod pyliteral;
mod real_data;
