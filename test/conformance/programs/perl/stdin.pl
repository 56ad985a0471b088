binmode STDIN;
binmode STDOUT;
local $/;
print <STDIN>;
