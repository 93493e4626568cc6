#!/usr/bin/env perl
# Minimal stand-in for OpenSSL's util/mkdef.pl, which the openssl-src crate leaves
# out of its copy of the OpenSSL tree. scripts/compat.sh copies it into the tree
# before building a core. It only writes what a Linux shared build needs: a GNU ld
# version script from an ordinals file (util/libcrypto.num, util/libssl.num,
# util/engines.num), with the same version nodes as upstream (OPENSSL_3.0.0,
# OPENSSL_3.0.3 <- OPENSSL_3.0.0, ...), so that programs and modules linked against
# another build of the same major version (e.g. Debian's 3.0 libcrypto) resolve
# their versioned symbols in this one.
#
# Called by the generated Makefile as:
#   mkdef.pl [--version X.Y.Z] --type lib|dso --ordinals FILE --name NAME --OS linux
use strict;
use warnings;

my ($version, $type, $ordinals, $name, $os);
while (@ARGV) {
    my $a = shift @ARGV;
    if    ($a eq '--version')  { $version  = shift @ARGV }
    elsif ($a eq '--type')     { $type     = shift @ARGV }
    elsif ($a eq '--ordinals') { $ordinals = shift @ARGV }
    elsif ($a eq '--name')     { $name     = shift @ARGV }
    elsif ($a eq '--OS')       { $os       = shift @ARGV }
    elsif ($a =~ /^--(version|type|ordinals|name|OS)=(.*)$/) {
        my %h = (version => \$version, type => \$type, ordinals => \$ordinals,
                 name => \$name, OS => \$os);
        ${ $h{$1} } = $2;
    }
    else { die "mkdef.pl (kae compat stand-in): unsupported argument $a\n" }
}
die "mkdef.pl: --ordinals is required\n" unless defined $ordinals;
die "mkdef.pl: only Linux/ELF targets are supported (--OS $os)\n"
    if defined $os && $os !~ /^(linux|bsd|solaris|elf|.*-gcc|.*-elf)/i && $os ne '';

# Platforms we build for: UNIX and Linux. Anything else listed positively
# (VMS, _WIN32, __FreeBSD__, ...) excludes the symbol; "!X" excludes it on X.
my %ours = map { $_ => 1 } qw(UNIX LINUX ELF);

open my $fh, '<', $ordinals or die "mkdef.pl: $ordinals: $!\n";
my (@order, %syms);
while (my $line = <$fh>) {
    next if $line =~ /^\s*(#|$)/;
    my ($sym, $num, $ver, $info) = split ' ', $line;
    next unless defined $info;
    my ($exist, $platforms) = split /:/, $info, 3;
    next unless $exist eq 'EXIST';
    my $ok = 1;
    my @pos;
    for my $p (grep { $_ ne '' } split /,/, ($platforms // '')) {
        if ($p =~ /^!(.*)$/) { $ok = 0 if $ours{$1} }
        else                 { push @pos, $p }
    }
    $ok = 0 if @pos && !grep { $ours{$_} } @pos;
    next unless $ok;
    $sym =~ s/\{.*\}$//;            # "SYM{ALIAS}" forms, if any
    (my $v = $ver) =~ s/_/./g;
    push @order, $v unless exists $syms{$v};
    push @{ $syms{$v} }, $sym;
}
close $fh;

sub vkey { my @p = split /\./, $_[0]; sprintf "%05d%05d%05d", map { $_ // 0 } @p[0..2] }

if (defined $version && $version ne '') {
    my $prev;
    for my $v (sort { vkey($a) cmp vkey($b) } @order) {
        print "OPENSSL_$v {\n    global:\n";
        print "        $_;\n" for sort @{ $syms{$v} };
        print "    local: *;\n" unless defined $prev;
        print defined $prev ? "} OPENSSL_$prev;\n" : "};\n";
        $prev = $v;
    }
} else {
    # Modules (engines): no version nodes, export the listed symbols only.
    print "{\n    global:\n";
    print "        $_;\n" for map { sort @{ $syms{$_} } } @order;
    print "    local: *;\n};\n";
}
