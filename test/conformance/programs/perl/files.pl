open(my $in, "<", "input.txt") or die "input.txt: $!";
local $/;
my $s = <$in>;
open(my $out, ">", "output.txt") or die "output.txt: $!";
print $out uc $s;
close $out or die;
