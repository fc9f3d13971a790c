/* SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause */
/*
 * What the two differential tests of the rebuilt hfi1.ko share: their
 * reproducible random numbers and the module parameter that runs them.
 */
#ifndef HFI1_TID_TESTPARAM_H
#define HFI1_TID_TESTPARAM_H

#include <linux/moduleparam.h>
#include <linux/types.h>

/* xorshift64*: reproducible inputs from the printed seed (never 0). */
static inline u64 hfi1_tid_xorshift(u64 *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return *state * 0x2545F4914F6CDD1DULL;
}

/*
 * A module parameter `name=N` (0: off) whose setting calls run(N): the
 * tests run while the parameter is parsed, before the driver's init.
 */
#define HFI1_TID_RUN_PARAM(name, run, desc)				\
	static unsigned long name;					\
	static int name##_set(const char *val,				\
			      const struct kernel_param *kp)		\
	{								\
		int ret = param_set_ulong(val, kp);			\
									\
		if (!ret && name)					\
			run(name);					\
		return ret;						\
	}								\
	static const struct kernel_param_ops name##_ops = {		\
		.set = name##_set,					\
		.get = param_get_ulong,					\
	};								\
	module_param_cb(name, &name##_ops, &name, 0644);		\
	MODULE_PARM_DESC(name, desc)

#endif /* HFI1_TID_TESTPARAM_H */
