// part placeholder so the library has a source; removed once the part has code
