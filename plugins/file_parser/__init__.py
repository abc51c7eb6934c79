"""The file-parser plugin: its stages (stage); loading an `input_file` (sources), reading each kind of file as text
(text; pdf, run in a limited child process by sandbox), reading scanned pages with a vision model (ocr), the file
annotations an answer carries (annotations) and the 400 naming a refused file (errors)."""
