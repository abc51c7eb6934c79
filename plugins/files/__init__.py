"""The file-parser plugin's parts: loading an `input_file` (sources), reading each kind of file as text (text,
pdf), reading scanned pages with a vision model (ocr) and the file annotations an answer carries (annotations).
The stage that uses them is plugins.file_parser."""
