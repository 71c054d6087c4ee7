// Placeholder until the store helper lands heat.cpp.
