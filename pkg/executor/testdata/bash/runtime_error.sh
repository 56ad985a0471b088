set -e
undefined_command_xyz
echo "not reached"
