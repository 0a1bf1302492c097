// host.cpp: a C++ host: strata.h's handles in unique_ptrs, a host function that is a lambda, a string in and out.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

#include <strata.h>

namespace {

// A failed strata call as an exception carrying strata_errmsg().
void check(int rc)
{
	if (rc < 0)
		throw std::runtime_error(std::string(strata_strerror(rc)) + ": " + strata_errmsg());
}

struct host_free {
	void operator()(strata_host *h) const { strata_host_free(h); }
};
struct sandbox_free {
	void operator()(strata_sandbox *sb) const { strata_sandbox_free(sb); }
};

std::string call_str(strata_sandbox *sb, const char *fn, const std::string &arg)
{
	strata_value v = { STRATA_STR, 0, arg.data(), arg.size() };
	strata_result res = { STRATA_VOID, 0, nullptr, 0 };
	check(strata_sandbox_call(sb, fn, &v, 1, 0, &res));
	std::string out(static_cast<const char *>(res.data), res.len);
	strata_result_clear(&res);
	return out;
}

} // namespace

int main(int argc, char **argv)
{
	// A last --backend auto|kvm|process (strata_backend_parse's words):
	// where the sandboxes run; auto is KVM where /dev/kvm opens.
	int backend = STRATA_BACKEND_AUTO;
	bool bad = false;
	if (argc > 2 && std::string(argv[argc - 2]) == "--backend") {
		bad = strata_backend_parse(argv[argc - 1], &backend) < 0;
		argc -= 2;
	}
	if (argc != 3 || bad) {
		std::fprintf(stderr, "usage: %s GUEST.elf WORD [--backend auto|kvm|process]\n", argv[0]);
		return 2;
	}
	try {
		strata_host *h = nullptr;
		check(strata_host_new(&h));
		std::unique_ptr<strata_host, host_free> host(h);
		check(strata_host_set_backend(host.get(), backend));
		// host_upper(s) -> s: a captureless lambda is a strata_host_fn.
		static std::string upper;
		check(strata_host_register(host.get(), "host_upper", "s(s)",
					   [](void *, const strata_value *args, size_t, strata_value *ret) -> int {
						   upper.assign(static_cast<const char *>(args[0].data), args[0].len);
						   for (char &c : upper)
							   if (c >= 'a' && c <= 'z')
								   c = static_cast<char>(c - 'a' + 'A');
						   ret->type = STRATA_STR;
						   ret->data = upper.data();
						   ret->len = upper.size();
						   return 0;
					   },
					   nullptr));
		strata_sandbox *sb = nullptr;
		check(strata_sandbox_new(host.get(), argv[1], &sb));
		std::unique_ptr<strata_sandbox, sandbox_free> sandbox(sb);
		std::printf("backend: %s\n", strata_backend_name(strata_sandbox_backend(sb)));
		std::printf("libstrata %s: %s\n", strata_version(nullptr, nullptr, nullptr),
			    call_str(sandbox.get(), "upper_via_host", argv[2]).c_str());
		sandbox.reset();  // before the host
	} catch (const std::exception &e) {
		std::fprintf(stderr, "%s\n", e.what());
		return 1;
	}
	return 0;
}
